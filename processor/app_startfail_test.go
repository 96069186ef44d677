package processor_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/processor"
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

// run runs the App with opts to its end, which must be an error.
func (r *startFailRig) run(opts ...processor.Option) error {
	t := r.t
	t.Helper()
	topo, err := buildCount(r.appID, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
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
