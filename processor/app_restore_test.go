package processor_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// restoreRecorder is a processor.RestoreListener that records every call
// and lets a test hold a task's restore in OnBatchRestored.
type restoreRecorder struct {
	mu      sync.Mutex
	starts  map[topology.TaskID][][2]int64 // start, end offsets
	batches map[topology.TaskID][][2]int64 // batch end offset, records
	ends    map[topology.TaskID][]int64
	started map[topology.TaskID]chan struct{} // closed at the first batch
	// hold, when set, runs in OnBatchRestored before it returns.
	hold func(id topology.TaskID)
}

func newRestoreRecorder() *restoreRecorder {
	return &restoreRecorder{starts: map[topology.TaskID][][2]int64{}, batches: map[topology.TaskID][][2]int64{},
		ends: map[topology.TaskID][]int64{}, started: map[topology.TaskID]chan struct{}{}}
}

func (r *restoreRecorder) startedCh(id topology.TaskID) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started[id] == nil {
		r.started[id] = make(chan struct{})
	}
	return r.started[id]
}

func (r *restoreRecorder) OnRestoreStart(id topology.TaskID, _ string, _ changelog.TopicPartition, from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts[id] = append(r.starts[id], [2]int64{from, to})
}

func (r *restoreRecorder) OnBatchRestored(id topology.TaskID, _ string, _ changelog.TopicPartition, end, n int64) {
	ch := r.startedCh(id)
	r.mu.Lock()
	first := len(r.batches[id]) == 0
	r.batches[id] = append(r.batches[id], [2]int64{end, n})
	r.mu.Unlock()
	if first {
		close(ch)
	}
	if r.hold != nil {
		r.hold(id)
	}
}

func (r *restoreRecorder) OnRestoreEnd(id topology.TaskID, _ string, _ changelog.TopicPartition, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends[id] = append(r.ends[id], total)
}

func (r *restoreRecorder) ended(id topology.TaskID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ends[id]) > 0
}

// checkConsistent checks task id's listener calls: one start, batches in
// offset order whose last one reaches the end offset, and an end whose
// total is the sum of the batches' counts and at least min.
func (r *restoreRecorder) checkConsistent(t *testing.T, id topology.TaskID, min int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.starts[id]) != 1 || len(r.ends[id]) != 1 {
		t.Fatalf("task %s: %d starts and %d ends, want one each (one logged store)", id, len(r.starts[id]), len(r.ends[id]))
	}
	from, to := r.starts[id][0][0], r.starts[id][0][1]
	var sum int64
	last := from - 1
	for _, b := range r.batches[id] {
		if b[0] <= last || b[0] >= to || b[1] < 0 || b[1] > b[0]-last {
			t.Fatalf("task %s: batch (end %d, %d records) after offset %d, restoring [%d, %d)", id, b[0], b[1], last, from, to)
		}
		last = b[0]
		sum += b[1]
	}
	if last != to-1 {
		t.Fatalf("task %s: the batches end at offset %d, the restore at %d", id, last, to-1)
	}
	t.Logf("task %s: restored %d records of offsets [%d, %d) in %d batches", id, sum, from, to, len(r.batches[id]))
	if total := r.ends[id][0]; total != sum || total < min {
		t.Fatalf("task %s: OnRestoreEnd total %d, batches sum to %d, want at least %d", id, total, sum, min)
	}
}

var (
	taskA = topology.TaskID{SubTopology: 0, Partition: 0}
	taskB = topology.TaskID{SubTopology: 0, Partition: 1}
)

// growChangelog appends n records of new keys to partition p of the count
// store's changelog (task 0_p's), copying a real record's kind tag and
// value, so that restoring task 0_p from scratch reads them all. The
// input keys' counts are unaffected.
func growChangelog(t *testing.T, app string, p int32, n int) {
	t.Helper()
	topic := changelog.TopicName(app, "counts")
	var tmpl *kgo.Record
	kafkatest.ConsumeUntil(t, topic, 30*time.Second, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if r.Partition == p && len(r.Key) > 1 && bytes.HasPrefix(r.Key[1:], []byte("sku-")) && r.Value != nil {
				tmpl = r
				return true
			}
		}
		return false
	})
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		key := append([]byte{tmpl.Key[0]}, fmt.Sprintf("bulk-%07d", i)...)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: tmpl.Value})
	}
	for len(recs) > 0 {
		k := min(len(recs), 50_000)
		kafkatest.Produce(t, recs[:k]...)
		recs = recs[k:]
	}
}

// keysOn keeps the keys of want that go to partition p of 2.
func keysOn(want map[string]int, p int32) map[string]int {
	out := map[string]int{}
	for k, n := range want {
		if processor.DefaultPartition([]byte(k), 2) == p {
			out[k] = n
		}
	}
	return out
}

func addCounts(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range a {
		out[k] += n
	}
	for k, n := range b {
		out[k] += n
	}
	return out
}

// reached reports whether the count outputs rs reached want's counts for
// every key of want.
func reached(rs []*kgo.Record, want map[string]int) bool {
	top := map[string]int{}
	for _, r := range rs {
		if len(r.Value) == 8 {
			top[string(r.Key)] = max(top[string(r.Key)], int(binary.BigEndian.Uint64(r.Value)))
		}
	}
	for k, n := range want {
		if top[k] < n {
			return false
		}
	}
	return true
}

// TestRestoreRunsOffTheRecordLoop restores task 0_0 from scratch from a
// changelog of 200k records while task 0_1's input keeps arriving: 0_1's
// outputs are read while 0_0's restore is still in progress (its
// listener holds it until they are), and at the end every count of both
// tasks is exactly once: 0_0's input, not consumed during the restore, is
// processed after it, none lost or repeated.
func TestRestoreRunsOffTheRecordLoop(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "restore-async"), in, out)
	want := produceKeysN(t, in, 0, 200, 10, 2)
	_, stop := runApp(t, topo)
	checkCounts(t, out, want)
	stop()
	const bulk = 200_000
	growChangelog(t, topo.Application(), 0, bulk)

	rec := newRestoreRecorder()
	release := make(chan struct{})
	var holdOnce sync.Once
	rec.hold = func(id topology.TaskID) {
		if id != taskA {
			return
		}
		holdOnce.Do(func() {
			select {
			case <-release:
			case <-time.After(45 * time.Second):
			}
		})
	}
	start := time.Now()
	runApp(t, topo, processor.WithRestoreListener(rec)) // a fresh state dir: both tasks restore from scratch
	select {
	case <-rec.startedCh(taskA):
	case <-time.After(30 * time.Second):
		t.Fatal("task 0_0 did not start restoring within 30s")
	}
	more := produceKeysN(t, in, 200, 200, 10, 2)
	all := addCounts(want, more)
	kafkatest.ConsumeUntil(t, out, 30*time.Second, func(rs []*kgo.Record) bool { return reached(rs, keysOn(all, 1)) })
	if rec.ended(taskA) {
		t.Fatal("task 0_0's restore ended before task 0_1's outputs were read: the test proves nothing")
	}
	t.Logf("task 0_1's outputs read %v after the start, while task 0_0 restores", time.Since(start).Round(time.Millisecond))
	close(release)
	checkCounts(t, out, all)
	rec.checkConsistent(t, taskA, bulk)
	rec.checkConsistent(t, taskB, 1)
}

// restoreGoroutines lists the goroutines running a task restore.
func restoreGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "processor.(*session).startRestore") || strings.Contains(g, "changelog.(*DB).restore") {
			out = append(out, g)
		}
	}
	return out
}

// TestRestoreStopsCleanlyWhenStoppedMidway stops an App while task 0_0
// restores a large changelog: Run returns promptly, no restore goroutine
// is left, the listener heard no end, and a restart on the same state
// directory (holding the partial restore) restores fully and counts
// exactly once.
func TestRestoreStopsCleanlyWhenStoppedMidway(t *testing.T) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "restore-stop"), in, out)
	want := produceKeysN(t, in, 0, 200, 10, 2)
	_, stop := runApp(t, topo)
	checkCounts(t, out, want)
	stop()
	const bulk = 200_000
	growChangelog(t, topo.Application(), 0, bulk)

	dir := t.TempDir()
	rec := newRestoreRecorder()
	rec.hold = func(id topology.TaskID) {
		if id == taskA {
			time.Sleep(100 * time.Millisecond) // a slow restore
		}
	}
	_, stop = runApp(t, topo, processor.WithStateDir(dir), processor.WithRestoreListener(rec))
	select {
	case <-rec.startedCh(taskA):
	case <-time.After(30 * time.Second):
		t.Fatal("task 0_0 did not start restoring within 30s")
	}
	more := produceKeysN(t, in, 200, 100, 10, 2)
	stopped := time.Now()
	stop()
	if d := time.Since(stopped); d > 15*time.Second {
		t.Fatalf("stopping during a restore took %v", d)
	}
	if rec.ended(taskA) {
		t.Fatal("task 0_0's restore ended before the stop: the test proves nothing")
	}
	if gs := restoreGoroutines(); len(gs) > 0 {
		t.Fatalf("%d restore goroutines left after Run returned:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}

	rec2 := newRestoreRecorder()
	runApp(t, topo, processor.WithStateDir(dir), processor.WithRestoreListener(rec2))
	checkCounts(t, out, addCounts(want, more))
	rec2.checkConsistent(t, taskA, 1)
}

// TestRestoreRevokedMidwayMovesCleanly has a second instance join while
// the first restores task 0_1 from a large changelog. The first instance
// is the more caught up (it reports the restore's remaining offsets), so
// it keeps 0_1 while the newcomer warms it up, as in Kafka Streams'
// KIP-441; once the warm-up has caught up, a probing rebalance moves
// partition 1 to the newcomer, so the first instance's restore is revoked
// midway (its listener hears no end) while it keeps running task 0_0. All
// counts are exactly once, which with that restore unfinished means the
// newcomer ran 0_1. No restore goroutine is left once both stop.
func TestRestoreRevokedMidwayMovesCleanly(t *testing.T) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "restore-revoke"), in, out)
	want := produceKeysN(t, in, 0, 200, 10, 2)
	_, stop := runApp(t, topo)
	checkCounts(t, out, want)
	stop()
	const bulk = 200_000
	growChangelog(t, topo.Application(), 1, bulk)

	rec1 := newRestoreRecorder()
	rec1.hold = func(id topology.TaskID) {
		if id == taskB {
			time.Sleep(300 * time.Millisecond) // a slow restore
		}
	}
	_, stop1 := runApp(t, topo, processor.WithInstanceID("restore-revoke-1"), processor.WithRestoreListener(rec1))
	select {
	case <-rec1.startedCh(taskB):
	case <-time.After(30 * time.Second):
		t.Fatal("task 0_1 did not start restoring within 30s")
	}
	rec2 := newRestoreRecorder()
	_, stop2 := runApp(t, topo, processor.WithInstanceID("restore-revoke-2"), processor.WithRestoreListener(rec2))
	more := produceKeysN(t, in, 200, 200, 10, 2)
	all := addCounts(want, more)
	// Task 0_0 keeps running on the first instance throughout.
	kafkatest.ConsumeUntil(t, out, 30*time.Second, func(rs []*kgo.Record) bool { return reached(rs, keysOn(all, 0)) })
	checkCounts(t, out, all)
	if rec1.ended(taskB) {
		t.Fatal("the first instance finished restoring task 0_1: it was not revoked midway")
	}
	stop2()
	stop1()
	if gs := restoreGoroutines(); len(gs) > 0 {
		t.Fatalf("%d restore goroutines left after Run returned:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}

// initEmitter forwards one record from Init, which runs on the restore
// goroutine.
type initEmitter struct{}

func (initEmitter) Init(ctx topology.ProcessorContext[string, int64]) error {
	return ctx.Forward(topology.Record[string, int64]{Key: "init", Value: 1, Timestamp: time.Now().UnixMilli()})
}
func (initEmitter) Process(topology.Record[string, string]) error { return nil }
func (initEmitter) Close() error                                  { return nil }

// TestInitOutputsCommitOnTheLoop: what a processor emits from Init, on the
// restore goroutine, is held and committed by the loop once the task
// runs, once per task opening (the race detector watches the hand-over).
func TestInitOutputsCommitOnTheLoop(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "init-emit"))
	b.Stream(in, serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, int64] { return initEmitter{} }).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, topo)
	got := kafkatest.ConsumeExactly(t, out, 1, kafkatest.Timeout, time.Second)
	if string(got[0].Key) != "init" {
		t.Fatalf("got %q, want the record Init emitted", got[0].Key)
	}
}
