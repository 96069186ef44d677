package processor_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// snapshotRecorder is a restoreRecorder that also hears of snapshot loads.
type snapshotRecorder struct {
	*restoreRecorder
	smu    sync.Mutex
	loaded map[topology.TaskID]changelog.ChangelogOffsets
}

func (r *snapshotRecorder) OnSnapshotLoaded(id topology.TaskID, chain string, seq int, bytes int64, offs changelog.ChangelogOffsets) {
	r.smu.Lock()
	defer r.smu.Unlock()
	r.loaded[id] = offs
}

// restoredTotal sums every OnRestoreEnd total.
func (r *restoreRecorder) restoredTotal() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, ends := range r.ends {
		for _, e := range ends {
			n += e
		}
	}
	return n
}

// fastCheckpoints checkpoints (and so snapshots) every few hundred ms.
func fastCheckpoints(c *processor.Config) {
	c.Checkpoint = frontier.CheckpointOptions{MinInterval: 100 * time.Millisecond, MaxInterval: 300 * time.Millisecond}
}

// waitSnapshotted waits until each task's newest snapshot reflects the
// input up to want (input partition -> end offset).
func waitSnapshotted(t *testing.T, ss *changelog.SnapshotStore, in string, want map[int32]int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last []string
	for {
		done := true
		last = last[:0]
		for p, end := range want {
			task := fmt.Sprintf("0_%d", p)
			chains, err := ss.Chains(context.Background(), task)
			if err != nil {
				t.Fatal(err)
			}
			if len(chains) == 0 {
				done = false
				break
			}
			ms, err := ss.Manifests(context.Background(), task, chains[len(chains)-1])
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				done = false
				break
			}
			got, _ := ms[len(ms)-1].Position.Offset(in, p)
			last = append(last, fmt.Sprintf("%s: chain %s seq %d at %d", task, chains[len(chains)-1], ms[len(ms)-1].Seq, got))
			if got != end {
				done = false
				break
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots did not reach the input ends %v within %s: %v", want, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAppRestoresFromSnapshotOnFreshState: an App counts 100k keys with
// frequent checkpoints, each followed by a snapshot to a file:// store,
// and stops; a new App with a fresh state directory and the same store
// loads the snapshots, restores only the changelog tail (far fewer than
// the 100k records of the count store's changelog), and counts the next
// input exactly once from there.
func TestAppRestoresFromSnapshotOnFreshState(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "app")
	topo := countTopology(t, appID, in, out)
	snapDir := t.TempDir()
	url := "file://" + snapDir
	const keys = 100_000

	// Four chunks of 25k new keys, each snapshotted before the next
	// (a full backup and three incrementals), then a tail of 3000 updates
	// the App may stop before snapshotting.
	_, stop := runApp(t, topo, processor.WithSnapshotStore(url), processor.WithSnapshotChainLength(4),
		fastCheckpoints, fixedCommits(200*time.Millisecond))
	ss, err := changelog.OpenSnapshotStore(context.Background(), url, appID, changelog.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	want := map[string]int{}
	ends := map[int32]int64{}
	for chunk := range 4 {
		for k, n := range produceKeysN(t, in, chunk*keys/4, keys/4, keys, 2) {
			want[k] += n
			ends[processor.DefaultPartition([]byte(k), 2)] += int64(n)
		}
		waitSnapshotted(t, ss, in, ends, 30*time.Second)
	}
	for k, n := range produceKeysN(t, in, keys, 3000, 3000, 2) {
		want[k] += n
	}
	first := kafkatest.ConsumeExactly(t, out, keys+3000, time.Minute, time.Second)
	stop()
	for p := range ends {
		task := fmt.Sprintf("0_%d", p)
		chains, _ := ss.Chains(context.Background(), task)
		ms, _ := ss.Manifests(context.Background(), task, chains[len(chains)-1])
		t.Logf("task %s: snapshot chains %v, newest has %d snapshots", task, chains, len(ms))
	}

	// Updates of keys from every chunk: each snapshot of the chain must
	// have been loaded for their counts to continue.
	var recs []*kgo.Record
	for i := 0; i < keys; i += 37 {
		k := fmt.Sprintf("sku-%02d", i)
		want[k]++
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("x"), Partition: processor.DefaultPartition([]byte(k), 2)})
	}
	kafkatest.Produce(t, recs...)
	rec := &snapshotRecorder{restoreRecorder: newRestoreRecorder(), loaded: map[topology.TaskID]changelog.ChangelogOffsets{}}
	runApp(t, topo, processor.WithSnapshotStore(url), processor.WithRestoreListener(rec), fastCheckpoints,
		fixedCommits(200*time.Millisecond)) // a fresh state directory
	rest := kafkatest.ConsumeExactly(t, out, keys+3000+len(recs), time.Minute, 2*time.Second)
	checkCountRecords(t, rest, want)
	if len(first) != keys+3000 {
		t.Fatalf("first run: %d outputs", len(first))
	}
	rec.smu.Lock()
	loaded := len(rec.loaded)
	rec.smu.Unlock()
	if loaded != 2 {
		t.Fatalf("snapshots loaded for %d tasks (%v), want both", loaded, rec.loaded)
	}
	restored := rec.restoredTotal()
	t.Logf("restored %d changelog records after the snapshots (the changelog holds %d)", restored, keys)
	if restored > keys/20 {
		t.Fatalf("restored %d changelog records, want only the tail after the snapshot (well under %d)", restored, keys/20)
	}
}

// TestAppSnapshotHoldsNoUncommittedState: a record that fails after its
// count was updated aborts its transaction (ContinueOnError redoes the
// transaction without it), while snapshots are taken every few hundred
// ms off the record loop. A new App with a fresh state directory loads
// the snapshots and continues: every key's counts must go on from the
// committed count, never from one that includes an aborted update.
func TestAppSnapshotHoldsNoUncommittedState(t *testing.T) {
	t.Parallel()
	in, out, mirror := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "app")
	b := topology.NewBuilder(appID)
	s := b.Stream(in, serde.String(), serde.Int64())
	// The count is updated first; the failing branch then aborts the
	// transaction of a negative record.
	s.GroupByKey(topology.Named("counts")).Count(topology.Named("counts")).ToStream().To(out)
	s.Process(func() topology.Processor[string, int64, string, int64] { return &failNegative{} }).
		WithSerdes(serde.String(), serde.Int64()).To(mirror)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	snapDir := t.TempDir()
	url := "file://" + snapDir
	ss, err := changelog.OpenSnapshotStore(context.Background(), url, appID, changelog.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()

	want := map[string]int{}
	ends := map[int32]int64{}
	outputs, n := 0, 0
	produce := func(records int, poison bool) {
		var recs []*kgo.Record
		for range records {
			k := fmt.Sprintf("sku-%03d", n%300)
			v := int64(n)
			if poison && n%97 == 13 {
				v = -1 // fails after its count was updated
			} else {
				want[k]++
				outputs++
			}
			p := processor.DefaultPartition([]byte(k), 2)
			ends[p]++
			recs = append(recs, int64Record(in, p, k, &v))
			n++
		}
		kafkatest.Produce(t, recs...)
	}
	opts := []processor.Option{processor.WithSnapshotStore(url), processor.WithSnapshotChainLength(3),
		processor.WithProcessingErrorHandler(processor.ContinueOnError), fastCheckpoints, fixedCommits(100 * time.Millisecond)}
	app, stop := runApp(t, topo, append(opts, processor.WithHTTP("127.0.0.1:0"))...)
	for range 5 {
		produce(3000, true)
		waitSnapshotted(t, ss, in, ends, 30*time.Second)
	}
	kafkatest.ConsumeExactly(t, out, outputs, time.Minute, time.Second)
	m := scrape(t, "http://"+app.HTTPAddr())
	if m["tidemark_aborts_total"] == 0 || m["tidemark_snapshot_bytes_total"] == 0 || m["tidemark_snapshot_seconds_count"] == 0 {
		t.Fatalf("aborts %v, snapshot bytes %v, snapshots %v: want aborted transactions and snapshots",
			m["tidemark_aborts_total"], m["tidemark_snapshot_bytes_total"], m["tidemark_snapshot_seconds_count"])
	}
	stop()

	produce(600, false) // every key once more
	rec := &snapshotRecorder{restoreRecorder: newRestoreRecorder(), loaded: map[topology.TaskID]changelog.ChangelogOffsets{}}
	app2, _ := runApp(t, topo, append(opts, processor.WithRestoreListener(rec), processor.WithHTTP("127.0.0.1:0"))...) // a fresh state directory
	checkCountRecords(t, kafkatest.ConsumeExactly(t, out, outputs, time.Minute, 2*time.Second), want)
	if m := scrape(t, "http://"+app2.HTTPAddr()); m["tidemark_snapshot_restores_total"] != 2 {
		t.Fatalf("tidemark_snapshot_restores_total = %v, want 2 (both tasks loaded)", m["tidemark_snapshot_restores_total"])
	}
	rec.smu.Lock()
	defer rec.smu.Unlock()
	if len(rec.loaded) != 2 {
		t.Fatalf("snapshots loaded for %d tasks, want both", len(rec.loaded))
	}
}

// TestWarmUpLoadsSnapshotOnFreshState: A counts 40k keys on 2 partitions
// alone, snapshotting after frequent checkpoints; B joins with a fresh
// state directory and the same snapshot store. B has no state, so the
// group gives it its share as a warm-up first (a member without state is
// never caught up): that warm-up must start from the task's snapshot, not
// read the task's changelog from offset 0, before the task moves to B.
// Counts stay exactly once across the move.
func TestWarmUpLoadsSnapshotOnFreshState(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "warmsnap")
	topo := countTopology(t, appID, in, out)
	url := "file://" + t.TempDir()
	const keys = 40_000
	probe := processor.WithProbingRebalanceInterval(2 * time.Second)
	runApp(t, topo, processor.WithInstanceID("a"), processor.WithSnapshotStore(url), fastCheckpoints,
		fixedCommits(200*time.Millisecond), probe)
	ss, err := changelog.OpenSnapshotStore(context.Background(), url, appID, changelog.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	want := produceKeysN(t, in, 0, keys, keys, 2)
	ends := map[int32]int64{}
	for k, n := range want {
		ends[processor.DefaultPartition([]byte(k), 2)] += int64(n)
	}
	waitSnapshotted(t, ss, in, ends, 60*time.Second)

	rec := &snapshotRecorder{restoreRecorder: newRestoreRecorder(), loaded: map[topology.TaskID]changelog.ChangelogOffsets{}}
	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithSnapshotStore(url), processor.WithRestoreListener(rec),
		processor.WithHTTP("127.0.0.1:0"), fastCheckpoints, fixedCommits(200*time.Millisecond), probe)
	v := waitTasks(t, b, 60*time.Second, "B got an active task", func(v tasksView) bool { return len(v.Active) > 0 })
	rec.smu.Lock()
	loaded := maps.Clone(rec.loaded)
	rec.smu.Unlock()
	m := scrape(t, baseURL(t, b))
	t.Logf("B runs %v; snapshots loaded for %v; changelog records restored %.0f of %d", v.Active, slices.SortedFunc(maps.Keys(loaded), func(a, b topology.TaskID) int { return strings.Compare(a.String(), b.String()) }), m["tidemark_restored_records_total"], keys)
	byName := map[string]bool{}
	for id := range loaded {
		byName[id.String()] = true
	}
	for _, id := range v.Active {
		if !byName[id] {
			t.Errorf("B's task %s was not started from its snapshot (loaded: %v)", id, loaded)
		}
	}
	if n := m["tidemark_restored_records_total"]; n > keys/10 {
		t.Errorf("B restored %.0f changelog records: its warm-up should have read only the tail after the snapshot (the changelog holds %d)", n, keys/2)
	}
	more := produceKeysN(t, in, keys, 4_000, keys, 2)
	checkCounts(t, out, addCounts(want, more))
}
