package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// countApp counts page views per page, as README's first service does:
// input key user, value page; through the repartition topic
// <app>-views-by-page-repartition into the store view-counts
// (<app>-view-counts-changelog); output key page, value the count.
func countApp(t *testing.T, app, in, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).
		GroupBy(func(_, page string) string { return page }, serde.String(), topology.Named("views-by-page")).
		Count(topology.Named("view-counts")).
		ToStream().
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// runUntil runs topo with state in dir until out holds want records, then
// stops it gracefully (it leaves the group), and returns out's records.
func runUntil(t *testing.T, topo *topology.Topology, dir, out string, want int) []*kgo.Record {
	t.Helper()
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(dir),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 100 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	recs := kafkatest.ConsumeExactly(t, out, want, 40*time.Second, time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("app run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("app did not stop within 30s")
	}
	return recs
}

// pageViews writes n views over 2 partitions: page-(i%3) by user-(i%4).
func pageViews(t *testing.T, in string, n int) {
	t.Helper()
	// Recent timestamps: the broker's retention deletes records from 1970.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Key: fmt.Appendf(nil, "user-%d", i%4),
			Value: fmt.Appendf(nil, "page-%d", i%3), Timestamp: base.Add(time.Duration(i+1) * time.Second)})
	}
	kafkatest.Produce(t, recs...)
}

// perKey renders records as, per output partition and key, the values in
// offset order: what a count app determines regardless of how the
// repartition topic interleaved the two input partitions.
func perKey(recs []*kgo.Record) map[string][]int64 {
	m := map[string][]int64{}
	for _, r := range recs {
		v, err := serde.Int64().Decode(r.Value)
		if err != nil {
			v = -1
		}
		k := fmt.Sprintf("%d/%s", r.Partition, r.Key)
		m[k] = append(m[k], v)
	}
	return m
}

func cleanupTopics(t *testing.T, app string) {
	adm := kafkatest.Admin(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
		defer cancel()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return
		}
		var mine []string
		for name := range topics {
			if strings.HasPrefix(name, app+"-") {
				mine = append(mine, name)
			}
		}
		if len(mine) > 0 {
			_, _ = adm.DeleteTopics(ctx, mine...)
		}
	})
}

// The user-visible guarantee: after a reset, the application run again
// over the same input writes exactly what its first run wrote.
func TestResetReprocessesToTheSameOutputs(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := kafkatest.UniqueName(t, "app")
	cleanupTopics(t, app)
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	const n = 30
	pageViews(t, in, n)
	parent := t.TempDir()
	topo := countApp(t, app, in, out)

	first := runUntil(t, topo, filepath.Join(parent, app), out, n)
	if _, err := os.Stat(filepath.Join(parent, app, "STATE")); err != nil {
		t.Fatalf("the app's state directory: %v", err)
	}

	stdout, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", parent, "--execute")
	if err != nil {
		t.Fatalf("reset: %v\n%s", err, stdout)
	}
	for _, want := range []string{
		in + "/0: 15 -> 0", in + "/1: 15 -> 0",
		"  " + app + "-view-counts-changelog\n", "  " + app + "-views-by-page-repartition\n", "  " + app + "-frontier\n",
		"local state directory to delete: " + filepath.Join(parent, app),
		"deleted 3 internal topics", "deleted local state directory", "application \"" + app + "\" reset",
	} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("reset output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, app)); !os.IsNotExist(err) {
		t.Fatalf("state directory after reset: %v, want it gone", err)
	}
	checkOffsets(t, app, in, map[int32]int64{0: 0, 1: 0})

	all := runUntil(t, topo, filepath.Join(parent, app), out, 2*n)
	// The reader interleaves partitions as fetches return, differently in
	// each run: match the first run's records by partition and offset.
	type at struct {
		p int32
		o int64
	}
	firstAt := map[at]string{}
	for _, r := range first {
		firstAt[at{r.Partition, r.Offset}] = string(r.Value)
	}
	var second []*kgo.Record
	for _, r := range all {
		v, ok := firstAt[at{r.Partition, r.Offset}]
		switch {
		case !ok:
			second = append(second, r)
		case v != string(r.Value):
			t.Fatalf("the first run's output at %d/%d changed: %q, now %q", r.Partition, r.Offset, v, r.Value)
		default:
			delete(firstAt, at{r.Partition, r.Offset})
		}
	}
	if len(firstAt) != 0 || len(second) != n {
		t.Fatalf("the first run's outputs changed: %d of them not read again, %d new outputs (want %d)", len(firstAt), len(second), n)
	}
	a, b := perKey(first), perKey(second)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("outputs after the reset differ from the first run's:\nfirst:  %v\nsecond: %v", a, b)
	}
	if a["0/page-0"] == nil && a["1/page-0"] == nil || len(a) != 3 {
		t.Fatalf("first run's outputs %v: want counts of 3 pages", a)
	}

	// Twice is fine: nothing left to delete.
	stdout, err = runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", parent, "--execute")
	if err != nil {
		t.Fatalf("second reset: %v\n%s", err, stdout)
	}
	checkOffsets(t, app, in, map[int32]int64{0: 0, 1: 0})
	if _, err := os.Stat(filepath.Join(parent, app)); !os.IsNotExist(err) {
		t.Fatalf("state directory after the second reset: %v, want it gone", err)
	}

	// What the reset's deletions are for: rewinding only the group's
	// offsets keeps the state (changelogs and local directory), and the
	// counts go on from where they were instead of starting over.
	all = runUntil(t, topo, filepath.Join(parent, app), out, 3*n) // again from scratch: as the first run
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: in, Partition: 0, At: 0, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: in, Partition: 1, At: 0, LeaderEpoch: -1})
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if resp, err := kafkatest.Admin(t).CommitOffsets(ctx, app, offs); err != nil || resp.Error() != nil {
		t.Fatalf("rewind offsets only: %v %v", err, resp.Error())
	}
	all = runUntil(t, topo, filepath.Join(parent, app), out, 4*n)
	if c := perKey(all[3*n:]); fmt.Sprint(c) == fmt.Sprint(a) {
		t.Fatalf("after rewinding only the offsets the outputs equal the first run's: %v", c)
	} else {
		t.Logf("offsets rewound, state kept: %v\nafter tidemark reset:       %v", c, a)
	}
}

// checkOffsets asserts the group's committed offsets of topic, and that
// they carry no metadata.
func checkOffsets(t *testing.T, group, topic string, want map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	offs, err := kafkatest.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p, at := range want {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != at || o.Metadata != "" {
			t.Fatalf("committed offset of %s/%d: %+v (found %v), want %d without metadata", topic, p, o, ok, at)
		}
	}
}

// fakeApp gives app committed offsets (with metadata) on a 2-partition
// input, a changelog topic and a state directory under a parent, without
// running it.
func fakeApp(t *testing.T, owner string) (app, in, parent string) {
	t.Helper()
	app = kafkatest.UniqueName(t, "app")
	cleanupTopics(t, app)
	in = kafkatest.NewTopic(t, 2, nil)
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, changelog.TopicName(app, "s")); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: in, Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "tidemark/1?st=5"})
	offs.Add(kadm.Offset{Topic: in, Partition: 1, At: 9, LeaderEpoch: -1, Metadata: "tidemark/1?st=6"})
	for { // the new topic takes a moment to be known everywhere
		resp, err := adm.CommitOffsets(ctx, app, offs)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("commit offsets: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	parent = t.TempDir()
	if owner == "" {
		owner = app
	}
	db, err := changelog.OpenDB(filepath.Join(parent, app), changelog.Options{Owner: changelog.Owner{Application: owner}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return app, in, parent
}

func clusterSnapshot(t *testing.T, app string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	adm := kafkatest.Admin(t)
	offs, err := adm.FetchOffsets(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range offs.Sorted() {
		fmt.Fprintf(&b, "%s/%d@%d %q; ", o.Topic, o.Partition, o.At, o.Metadata)
	}
	topics, err := adm.ListTopics(ctx, changelog.TopicName(app, "s"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "changelog exists %v", topics.Has(changelog.TopicName(app, "s")) && topics[changelog.TopicName(app, "s")].Err == nil)
	return b.String()
}

func TestResetDryRunPrintsThePlanAndChangesNothing(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app, in, parent := fakeApp(t, "")
	before := clusterSnapshot(t, app)
	stdout, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", parent)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stdout)
	}
	for _, want := range []string{
		"group " + app + ": Empty, no live members",
		"input offsets to reset to the earliest offset: 2 partitions", in + "/0: 7 -> 0", in + "/1: 9 -> 0",
		"internal topics to delete: 1\n  " + changelog.TopicName(app, "s") + "\n",
		"local state directory to delete: " + filepath.Join(parent, app),
		"dry run: nothing changed",
	} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	if after := clusterSnapshot(t, app); after != before || !strings.HasSuffix(after, "changelog exists true") {
		t.Fatalf("dry run changed the cluster:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(parent, app, "STATE")); err != nil {
		t.Fatalf("dry run touched the state directory: %v", err)
	}
}

func TestResetRefusesWhileAMemberIsAlive(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app, in, parent := fakeApp(t, "")
	assigned := make(chan struct{}, 1)
	cl := kafkatest.Client(t, kgo.ConsumerGroup(app), kgo.ConsumeTopics(in), kgo.InstanceID("live-1"),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("the member never got partitions")
	}
	before := clusterSnapshot(t, app)
	_, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", parent, "--execute")
	if err == nil || !strings.Contains(err.Error(), "live members") || !strings.Contains(err.Error(), "instance live-1") {
		t.Fatalf("reset with a live member = %v, want a refusal naming instance live-1", err)
	}
	// The member of a killed instance lingers for its session timeout:
	// the refusal says so, rather than only "stop every instance".
	if !strings.Contains(err.Error(), "until its session times out") {
		t.Fatalf("reset with a live member = %v, want it to say a crashed instance's member leaves when its session times out", err)
	}
	if after := clusterSnapshot(t, app); after != before {
		t.Fatalf("a refused reset changed the cluster:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(parent, app, "STATE")); err != nil {
		t.Fatalf("a refused reset touched the state directory: %v", err)
	}
}

func TestResetRefusesAnotherApplicationsStateDir(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	// <parent>/<app> holds another application's state.
	app, _, parent := fakeApp(t, "someone-else")
	before := clusterSnapshot(t, app)
	_, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", parent, "--execute")
	if err == nil || !strings.Contains(err.Error(), `holds the state of application "someone-else"`) {
		t.Fatalf("reset with another application's state dir = %v", err)
	}
	// The other application's own directory, given as it is.
	other := filepath.Join(t.TempDir(), "someone-else")
	db, err := changelog.OpenDB(other, changelog.Options{Owner: changelog.Owner{Application: "someone-else"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err = runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--state-dir", other, "--execute")
	if err == nil || !strings.Contains(err.Error(), `holds the state of application "someone-else"`) {
		t.Fatalf("reset given another application's directory = %v", err)
	}
	if after := clusterSnapshot(t, app); after != before {
		t.Fatalf("a refused reset changed the cluster:\nbefore %s\nafter  %s", before, after)
	}
	for _, dir := range []string{filepath.Join(parent, app), other} {
		if _, err := os.Stat(filepath.Join(dir, "STATE")); err != nil {
			t.Fatalf("a refused reset touched %s: %v", dir, err)
		}
	}
}

func TestResetToDatetimeTakesTheFirstOffsetAtOrAfter(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app, in, _ := fakeApp(t, "")
	base := time.Now().Add(-time.Hour).Truncate(time.Second) // recent: retention keeps it
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Value: []byte("v"), Timestamp: base.Add(time.Duration(i+1) * time.Second)})
	}
	kafkatest.Produce(t, recs...)
	stdout, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app,
		"--to-datetime", base.Add(2500*time.Millisecond).UTC().Format(time.RFC3339Nano))
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stdout)
	}
	// Partition 0: base+3 s is offset 2; partition 1 is empty: its end.
	for _, want := range []string{in + "/0: 7 -> 2", in + "/1: 9 -> 0", "local state directory: no --state-dir given"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--to-datetime", "yesterday"); err == nil ||
		!strings.Contains(err.Error(), `--to-datetime "yesterday"`) {
		t.Fatalf("reset with a bad time = %v", err)
	}
}

func TestResetKeepsTopicsOfALongerApplicationID(t *testing.T) {
	groups := kadm.ListedGroups{"shop": {}, "shop-eu": {}}
	for _, tc := range []struct {
		topic    string
		internal bool
		other    string
	}{
		{"shop-inventory-changelog", true, ""},
		{"shop-by-page-repartition", true, ""},
		{"shop-frontier", true, ""},
		{"shop-eu-inventory-changelog", true, "shop-eu"},
		{"shop-eu-frontier", false, ""}, // not named like one of shop's
		{"shop-orders", false, ""},
		{"shop--changelog", false, ""},
		{"shopping-x-changelog", false, ""},
	} {
		if got := isInternalTopic("shop", tc.topic); got != tc.internal {
			t.Errorf("isInternalTopic(shop, %s) = %v", tc.topic, got)
		}
		if !tc.internal {
			continue // reset only looks at topics named like its own
		}
		if got := longerGroup("shop", tc.topic, groups); got != tc.other {
			t.Errorf("longerGroup(shop, %s) = %q, want %q", tc.topic, got, tc.other)
		}
	}
}

// With --snapshot-store the reset deletes the application's snapshots
// (only its own): they reflect changelogs the reset deletes, and a new
// instance loaded them all only to rebuild every store from the new
// changelogs. The dry run counts them and deletes nothing.
func TestResetDeletesTheApplicationsSnapshots(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := kafkatest.UniqueName(t, "app")
	dir := t.TempDir()
	for _, rel := range []string{
		app + "/0_0/c01/00000000.backup", app + "/0_0/c01/00000000.manifest.json",
		app + "/0_1/c01/00000000.backup", app + "/0_1/c01/00000000.manifest.json",
		"other/0_0/c01/00000000.backup",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	url := "file://" + dir
	stdout, err := runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--snapshot-store", url)
	if err != nil || !strings.Contains(stdout, "snapshots to delete: 4 objects in "+url) {
		t.Fatalf("dry run: %v\n%s", err, stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, app, "0_0/c01/00000000.backup")); err != nil {
		t.Fatalf("the dry run deleted a snapshot: %v", err)
	}
	stdout, err = runSub(t, newResetCmd(), "--brokers", brokers, "--application", app, "--snapshot-store", url, "--execute")
	if err != nil || !strings.Contains(stdout, "deleted 4 snapshot objects from "+url) {
		t.Fatalf("reset: %v\n%s", err, stdout)
	}
	left := 0
	_ = filepath.Walk(filepath.Join(dir, app), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			left++
		}
		return nil
	})
	if left != 0 {
		t.Errorf("%d of the application's snapshot files left", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "other/0_0/c01/00000000.backup")); err != nil {
		t.Errorf("another application's snapshot: %v, want it kept", err)
	}
}
