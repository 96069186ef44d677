package processor_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A start that fails on its configuration must fail before it changes
// anything: no internal topic on the cluster, nothing in the state
// directory, and an error that says what to change.

// startFailRig is a kfake cluster with the input and output topics of
// buildCount, and an App on it that is expected not to start.
type startFailRig struct {
	t        *testing.T
	c        *kfake.Cluster
	appID    string
	stateDir string
}

func newStartFailRig(t *testing.T) *startFailRig {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &startFailRig{t: t, c: c, appID: "startfail-" + strings.ReplaceAll(t.Name(), "/", "-"),
		stateDir: filepath.Join(t.TempDir(), "state")}
}

// run runs an App of buildCount with opts to its end, which must be an
// error.
func (r *startFailRig) run(opts ...processor.Option) error {
	r.t.Helper()
	topo, err := buildCount(r.appID, "in", "out")
	if err != nil {
		r.t.Fatal(err)
	}
	return r.runBuilt(topo, opts...)
}

// runBuilt runs an App of topo on the rig's cluster and state directory
// with opts to its end, which must be an error before the deadline.
func (r *startFailRig) runBuilt(topo *topology.Topology, opts ...processor.Option) error {
	t := r.t
	t.Helper()
	app, err := processor.NewApp(topo, append([]processor.Option{processor.WithBrokers(r.c.ListenAddrs()...),
		processor.WithStateDir(r.stateDir), processor.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if err == nil {
		t.Fatal("Run returned nil; want a start-up error")
	}
	if ctx.Err() != nil {
		t.Fatalf("Run did not fail before its deadline: %v", err)
	}
	t.Logf("Run: %v", err)
	return err
}

// topics lists the cluster's topics.
func (r *startFailRig) topics() []string {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.c.ListenAddrs()...))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return td.Names()
}

// createTopic creates topic with partitions (and cleanup.policy, if not
// empty) on the rig's cluster.
func (r *startFailRig) createTopic(topic string, partitions int32, policy string) {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.c.ListenAddrs()...))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cfg map[string]*string
	if policy != "" {
		cfg = map[string]*string{"cleanup.policy": &policy}
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, cfg, topic); err != nil {
		r.t.Fatal(err)
	}
}

// runTopology runs an App of b's topology as runBuilt does.
func (r *startFailRig) runTopology(b *topology.Builder) error {
	r.t.Helper()
	topo, err := b.Build()
	if err != nil {
		r.t.Fatal(err)
	}
	return r.runBuilt(topo)
}

// assertUnchanged fails the test if the topics differ from before or the
// state directory was written.
func (r *startFailRig) assertUnchanged(before []string) {
	r.t.Helper()
	if after := r.topics(); !slices.Equal(after, before) {
		r.t.Errorf("the failed start changed the topics: before %v, after %v", before, after)
	}
	if _, err := os.Stat(r.stateDir); !errors.Is(err, fs.ErrNotExist) {
		r.t.Errorf("the failed start wrote the state directory (stat: %v)", err)
	}
}

// assertUntouched fails the test if the App created a topic or wrote its
// state directory.
func (r *startFailRig) assertUntouched() {
	r.t.Helper()
	for _, topic := range r.topics() {
		if topic != "in" && topic != "out" {
			r.t.Errorf("the failed start created topic %q", topic)
		}
	}
	if _, err := os.Stat(r.stateDir); !errors.Is(err, fs.ErrNotExist) {
		entries, _ := os.ReadDir(r.stateDir)
		r.t.Errorf("the failed start wrote the state directory %s (stat: %v, entries: %v)", r.stateDir, err, entries)
	}
}

func TestStartHTTPAddrTakenFailsFirst(t *testing.T) {
	r := newStartFailRig(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	err = r.run(processor.WithHTTP(addr))
	t.Logf("Run: %v", err)
	for _, want := range []string{addr, "WithHTTP", "http:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	r.assertUntouched()
}

func TestStartStateDirIsAFileFailsFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []processor.Option
	}{
		{"persisted instance id", nil},
		{"configured instance id", []processor.Option{processor.WithInstanceID("i-1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStartFailRig(t)
			if err := os.WriteFile(r.stateDir, []byte("not a directory\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := r.run(tc.opts...)
			t.Logf("Run: %v", err)
			for _, want := range []string{r.stateDir, "not a directory", "WithStateDir", "state_dir"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			for _, topic := range r.topics() {
				if topic != "in" && topic != "out" {
					t.Errorf("the failed start created topic %q", topic)
				}
			}
			if b, _ := os.ReadFile(r.stateDir); string(b) != "not a directory\n" {
				t.Errorf("the file in the state directory's place was changed: %q", b)
			}
		})
	}
}

// A second App on a state directory another running App holds fails
// before it creates anything, naming the directory and the holder.
func TestStartStateDirInUseNamesTheHolder(t *testing.T) {
	r := newStartFailRig(t)
	topo, err := buildCount(r.appID+"-first", "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	first, err := processor.NewApp(topo, processor.WithBrokers(r.c.ListenAddrs()...), processor.WithStateDir(r.stateDir),
		processor.WithInstanceID("first-1"), processor.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("first App: %v", err)
		}
	}()
	marker := filepath.Join(r.stateDir, "running")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first App did not open its state within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := r.topics()

	// The second App, another application on the same directory.
	err = r.run(processor.WithInstanceID("second-1"))
	t.Logf("Run: %v", err)
	for _, want := range []string{r.stateDir, "in use by another process", fmt.Sprintf("pid %d", os.Getpid()), "first-1", "WithStateDir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if after := r.topics(); len(after) != len(before) {
		t.Errorf("the failed start created topics: before %v, after %v", before, after)
	}
}

// A start that fails on a missing input topic leaves no state directory.
func TestStartMissingTopicLeavesNothing(t *testing.T) {
	r := newStartFailRig(t)
	topo, err := buildCount(r.appID, "absent", "out")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.runBuilt(topo); !errors.Is(err, processor.ErrMissingTopic) {
		t.Fatalf("Run: %v, want ErrMissingTopic", err)
	}
	r.assertUntouched()
}

// A state directory another application's state is in is refused before
// the start creates this application's topics.
func TestStartStateDirOfAnotherApplicationFailsFirst(t *testing.T) {
	r := newStartFailRig(t)
	db, err := changelog.OpenDB(r.stateDir, changelog.Options{Owner: changelog.Owner{Application: "someone-else"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err = r.run()
	t.Logf("Run: %v", err)
	if !errors.Is(err, changelog.ErrOwnedByOtherApplication) {
		t.Errorf("Run: %v, want ErrOwnedByOtherApplication", err)
	}
	for _, want := range []string{r.stateDir, "someone-else", "WithStateDir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	for _, topic := range r.topics() {
		if topic != "in" && topic != "out" {
			t.Errorf("the failed start created topic %q", topic)
		}
	}
}

// An input whose partitions were added (2 to 4) finds the changelog with
// the old count: the start is refused, naming the changelog, both counts
// and the input, before it creates the topology's other internal topics.
func TestStartChangelogOfAnotherCountFailsFirst(t *testing.T) {
	r := newStartFailRig(t)
	changelogTopic := r.appID + "-per-user-changelog"
	r.createTopic(changelogTopic, 2, "compact")
	r.createTopic("orders", 4, "")
	before := r.topics()
	b := topology.NewBuilder(r.appID)
	b.Stream("orders", serde.String(), serde.String()).
		SelectKey(func(_, v string) string { return v }).
		GroupByKey(topology.Named("by-user")).Count(topology.Named("per-user")).ToStream().To("out")
	err := r.runTopology(b)
	if !errors.Is(err, changelog.ErrChangelogMismatch) {
		t.Errorf("Run: %v, want ErrChangelogMismatch", err)
	}
	for _, want := range []string{changelogTopic + " has 2 partitions, the topology needs 4", "orders (4)", "reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	r.assertUnchanged(before)
}

// Join inputs of different partition counts refuse the start before any
// internal topic exists, naming both topics and counts.
func TestStartJoinInputsNotCopartitionedFailsFirst(t *testing.T) {
	r := newStartFailRig(t)
	r.createTopic("other", 4, "")
	before := r.topics()
	b := topology.NewBuilder(r.appID)
	other := b.Stream("other", serde.String(), serde.String())
	b.Stream("in", serde.String(), serde.String()).
		Join(other, func(_, l, o string) string { return l + o }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
	err := r.runTopology(b)
	if !errors.Is(err, topology.ErrNotCopartitioned) {
		t.Fatalf("Run: %v, want ErrNotCopartitioned", err)
	}
	if want := `"in" has 2 partitions, "other" has 4`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	r.assertUnchanged(before)
}

// RunApps binds every App's HTTP address before any App starts: the
// second App's taken port fails the start before the first App creates
// its topics.
func TestRunAppsHTTPAddrTakenFailsFirst(t *testing.T) {
	r := newStartFailRig(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var apps []*processor.App
	for i, addr := range []string{"127.0.0.1:0", taken.Addr().String()} {
		topo, err := buildCount(fmt.Sprintf("%s-%d", r.appID, i), "in", "out")
		if err != nil {
			t.Fatal(err)
		}
		app, err := processor.NewApp(topo, processor.WithBrokers(r.c.ListenAddrs()...), processor.WithHTTP(addr),
			processor.WithStateDir(filepath.Join(r.stateDir, strconv.Itoa(i))), processor.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = processor.RunApps(ctx, apps...)
	t.Logf("RunApps: %v", err)
	if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("RunApps: %v, want an error naming %s", err, taken.Addr())
	}
	r.assertUntouched()
}
