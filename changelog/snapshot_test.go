package changelog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/tidemark-streams/tidemark/store"
)

// snapHarness is a task with one logged key-value store, written in
// randomised commits (puts and deletes) against a model, and snapshotted
// to a bucket.
type snapHarness struct {
	t     *testing.T
	r     *rand.Rand
	db    *DB
	task  *TaskState
	kv    store.KeyValue
	p     *fakeProducer
	model map[string]string
	in    int64 // the input offset the next commit reflects
	ss    *SnapshotStore
	// partition is the task's input partition.
	partition int32
}

const snapTask = "0_3"

func newSnapHarness(t *testing.T, ss *SnapshotStore, opts Options) *snapHarness {
	return newTaskSnapHarness(t, ss, openTestDB(t, opts), snapTask, 3)
}

// newTaskSnapHarness is a snapHarness of task id (of partition p) in db.
func newTaskSnapHarness(t *testing.T, ss *SnapshotStore, db *DB, id string, p int32) *snapHarness {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	h := &snapHarness{t: t, r: rand.New(rand.NewPCG(seed, 7)), db: db, p: &fakeProducer{},
		model: map[string]string{}, ss: ss, partition: p}
	h.task = h.db.NewTaskState(TaskStateConfig{ID: id, AppID: "app", Partition: p, Producer: h.p})
	s, err := h.task.Open(store.Spec{Name: "counts", Kind: store.KindKeyValue, Logged: true}, p)
	if err != nil {
		t.Fatal(err)
	}
	h.kv = s.(store.KeyValue)
	t.Cleanup(func() { _ = h.task.Close() })
	return h
}

// write puts or deletes n random keys of a space of 300 into the
// overlay; the model follows only when commit is set.
func (h *snapHarness) write(n int, model map[string]string) {
	for range n {
		k := fmt.Sprintf("k%03d", h.r.IntN(300))
		if h.r.IntN(4) == 0 {
			if err := h.kv.Delete([]byte(k)); err != nil {
				h.t.Fatal(err)
			}
			delete(model, k)
			continue
		}
		v := fmt.Sprintf("v%d", h.r.IntN(1_000_000))
		if err := h.kv.Put([]byte(k), []byte(v)); err != nil {
			h.t.Fatal(err)
		}
		model[k] = v
	}
}

// commit writes a random batch and applies it as a committed
// transaction: flushed to the changelog, applied with its offsets and
// the input position.
func (h *snapHarness) commit() {
	h.write(1+h.r.IntN(60), h.model)
	h.in += 10
	h.task.StagePosition(InputPosition{"in": {h.partition: h.in}})
	offs, err := h.task.Flush(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.task.Apply(offs); err != nil {
		h.t.Fatal(err)
	}
}

func (h *snapHarness) snapshot() SnapshotResult {
	res, err := h.db.WriteSnapshots(context.Background(), h.ss)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(res) != 1 || res[0].Task != snapTask {
		h.t.Fatalf("WriteSnapshots = %+v, want one result for %s", res, snapTask)
	}
	return res[0]
}

// loadFresh loads the task's newest usable snapshot into a new state
// directory and returns its contents, offsets and position.
func loadFresh(t *testing.T, ss *SnapshotStore) (SnapshotLoad, map[string]string, map[TopicPartition]int64, InputPosition) {
	t.Helper()
	db := openTestDB(t, Options{})
	res, err := db.LoadSnapshot(context.Background(), ss, snapTask, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{ID: snapTask, AppID: "app", Partition: 3, Producer: &fakeProducer{}})
	defer task.Close()
	s, err := task.Open(store.Spec{Name: "counts", Kind: store.KindKeyValue, Logged: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := contents(t, s.(store.KeyValue))
	offs := map[TopicPartition]int64{}
	tp := TopicPartition{"app-counts-changelog", 3}
	if a, found, err := db.AppliedOffset(tp); err != nil {
		t.Fatal(err)
	} else if found {
		offs[tp] = a.Offset
	}
	pos, _, err := task.Position()
	if err != nil {
		t.Fatal(err)
	}
	return res, got, offs, pos
}

func memStore(t *testing.T, opts SnapshotOptions) *SnapshotStore {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = b.Close() })
	return NewSnapshotStore(b, "app", opts)
}

// TestSnapshotChainRestoresCommittedState writes randomised commits
// (puts, deletes, staged Applies) and a snapshot after each
// few, with chains of 4 and 2 kept; after each snapshot, a fresh state
// directory loads the newest chain and must hold exactly the model's
// state, the offsets and the input position of the last commit.
// Uncommitted writes in the overlay (flushed or not) never appear.
func TestSnapshotChainRestoresCommittedState(t *testing.T) {
	ss := memStore(t, SnapshotOptions{ChainLength: 4, Retention: 2})
	opts := Options{}
	opts.applyTxnLimit = 40 // larger commits take the staged path
	h := newSnapHarness(t, ss, opts)
	snaps := 0
	for round := range 14 {
		for range 1 + h.r.IntN(4) {
			h.commit()
		}
		// Uncommitted: written to the overlay (and flushed, half the
		// time) but not applied when the snapshot is taken.
		pending := maps.Clone(h.model)
		h.write(20, pending)
		var offs ChangelogOffsets
		if round%2 == 0 {
			var err error
			if offs, err = h.task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		res := h.snapshot()
		snaps++
		if res.Skipped {
			t.Fatalf("round %d: snapshot skipped", round)
		}
		if round == 5 {
			// Nothing applied since: no snapshot is written.
			if again := h.snapshot(); !again.Skipped {
				t.Fatalf("a snapshot with nothing new wrote %+v", again.Manifest)
			}
		}
		if want := (snaps - 1) % 4; res.Manifest.Seq != want {
			t.Fatalf("round %d: seq %d, want %d", round, res.Manifest.Seq, want)
		}
		load, got, gotOffs, pos := loadFresh(t, ss)
		if !load.Loaded || load.Manifest.Chain != res.Manifest.Chain || load.Manifest.Seq != res.Manifest.Seq {
			t.Fatalf("round %d: loaded %+v, want chain %s seq %d", round, load, res.Manifest.Chain, res.Manifest.Seq)
		}
		equalMaps(t, fmt.Sprintf("round %d: loaded state", round), got, h.model)
		wantOffs := res.Manifest.ChangelogOffsets()
		if len(wantOffs) != 1 || !maps.Equal(gotOffs, map[TopicPartition]int64(wantOffs)) {
			t.Fatalf("round %d: loaded offsets %v, manifest %v", round, gotOffs, wantOffs)
		}
		if p, _ := pos.Offset("in", 3); p != h.in {
			t.Fatalf("round %d: loaded position %v, want in/3 at %d", round, pos, h.in)
		}
		if p, _ := res.Manifest.Position.Offset("in", 3); p != h.in {
			t.Fatalf("round %d: manifest position %v, want in/3 at %d", round, res.Manifest.Position, h.in)
		}
		// Now commit what was pending, so the model follows.
		if offs == nil {
			var err error
			if offs, err = h.task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.task.Apply(offs); err != nil {
			t.Fatal(err)
		}
		h.model = pending
	}
	chains, err := ss.Chains(context.Background(), snapTask)
	if err != nil {
		t.Fatal(err)
	}
	if len(chains) != 2 {
		t.Fatalf("%d chains kept (%v), want 2 (retention)", len(chains), chains)
	}
}

// TestSnapshotDamagedChainFallsBack damages the newest chain (a flipped
// byte, then a missing manifest in the middle) and expects the previous
// chain to load; with both damaged, nothing loads and the task has no
// local state (its changelog restore starts from scratch).
func TestSnapshotDamagedChainFallsBack(t *testing.T) {
	dir := t.TempDir()
	ss, err := OpenSnapshotStore(context.Background(), "file://"+filepath.Join(dir, "snaps"), "app", SnapshotOptions{ChainLength: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	h := newSnapHarness(t, ss, Options{})
	var firstChain string
	var modelA map[string]string
	for i := range 5 { // chain A: seqs 0-2; chain B: seqs 0-1
		h.commit()
		res := h.snapshot()
		if i == 0 {
			firstChain = res.Manifest.Chain
		}
		if i == 2 {
			modelA = maps.Clone(h.model)
		}
	}
	chains, err := ss.Chains(context.Background(), snapTask)
	if err != nil || len(chains) != 2 || chains[0] != firstChain {
		t.Fatalf("chains %v (%v), want 2 starting with %s", chains, err, firstChain)
	}
	objPath := func(chain string, seq int, suffix string) string {
		return filepath.Join(dir, "snaps", "app", snapTask, chain, fmt.Sprintf("%08d.%s", seq, suffix))
	}
	// The complete newest chain loads.
	if load, got, _, _ := loadFresh(t, ss); !load.Loaded || load.Manifest.Chain != chains[1] {
		t.Fatalf("loaded %+v, want chain %s", load, chains[1])
	} else {
		equalMaps(t, "newest chain", got, h.model)
	}
	// A flipped byte in chain B's incremental backup.
	b, err := os.ReadFile(objPath(chains[1], 1, "backup"))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(objPath(chains[1], 1, "backup"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	load, got, _, _ := loadFresh(t, ss)
	if !load.Loaded || load.Manifest.Chain != chains[0] || load.Manifest.Seq != 2 || len(load.Skipped) != 1 {
		t.Fatalf("after damage: loaded %+v, want chain %s seq 2 with one chain skipped", load, chains[0])
	}
	equalMaps(t, "previous chain", got, modelA)
	// Chain A loses a manifest in the middle: nothing usable is left.
	if err := os.Remove(objPath(chains[0], 1, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	load, got, offs, _ := loadFresh(t, ss)
	if load.Loaded || len(load.Skipped) != 2 || len(got) != 0 || len(offs) != 0 {
		t.Fatalf("both chains damaged: loaded %+v, state %d keys, offsets %v; want nothing", load, len(got), offs)
	}
}

// TestSnapshotLoadKeepsLocalState: a task with local state loads nothing.
func TestSnapshotLoadKeepsLocalState(t *testing.T) {
	ss := memStore(t, SnapshotOptions{})
	h := newSnapHarness(t, ss, Options{})
	h.commit()
	h.snapshot()
	res, err := h.db.LoadSnapshot(context.Background(), ss, snapTask, nil)
	if err != nil || res.Loaded || !res.LocalState {
		t.Fatalf("LoadSnapshot of an open task = %+v, %v; want local state kept", res, err)
	}
}

// TestSnapshotIncrementalKeepsDeletesAcrossCompaction: keys in a full
// backup are deleted, then enough other writes follow for Badger to flush
// and compact level 0 into the last level, where a delete marker with no
// older level below is dropped together with the value it shadowed. The
// snapshot's pin keeps the markers for the next incremental backup: the
// chain must load without the deleted keys.
func TestSnapshotIncrementalKeepsDeletesAcrossCompaction(t *testing.T) {
	ss := memStore(t, SnapshotOptions{})
	opts := Options{MemoryBudget: 16 << 20}
	opts.levelZeroTables = 1
	h := newSnapHarness(t, ss, opts)
	for i := range 200 {
		if err := h.kv.Put(fmt.Appendf(nil, "gone-%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	h.commit()
	if res := h.snapshot(); res.Manifest.Seq != 0 {
		t.Fatalf("first snapshot has seq %d", res.Manifest.Seq)
	}
	for i := range 200 {
		if err := h.kv.Delete(fmt.Appendf(nil, "gone-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	h.commit()
	for k := range h.model {
		if len(k) > 5 && k[:5] == "gone-" {
			delete(h.model, k)
		}
	}
	// Filler outside every store's key range: about 3 memtables.
	h.db.mu.Lock()
	bdb := h.db.tasks[snapTask].bdb
	h.db.mu.Unlock()
	wb := bdb.NewWriteBatch()
	for i := range 150_000 {
		if err := wb.Set(fmt.Appendf(nil, "zfill-%07d", i), make([]byte, 40)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		compacted := false
		for _, ti := range bdb.Tables() {
			compacted = compacted || ti.Level > 0
		}
		if compacted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("level 0 was not compacted: %d tables", len(bdb.Tables()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := h.snapshot()
	if res.Manifest.Seq != 1 {
		t.Fatalf("second snapshot has seq %d, want an incremental", res.Manifest.Seq)
	}
	_, got, _, _ := loadFresh(t, ss)
	equalMaps(t, "after deletes and a compaction", got, h.model)
}

// Writing and loading a snapshot both go through the store's Pace: a
// snapshot is background work that must not take the cores from the
// running tasks (on 2 cores, two unpaced full backups stalled the other
// tasks of the instance for ~300 ms). The paced load still loads exactly
// the committed state.
func TestSnapshotWriteAndLoadArePaced(t *testing.T) {
	var calls atomic.Int64
	ss := memStore(t, SnapshotOptions{Pace: func(context.Context, time.Duration) error {
		calls.Add(1)
		return nil
	}})
	h := newSnapHarness(t, ss, Options{})
	value := strings.Repeat("v", 200)
	for i := range 60_000 {
		k := fmt.Sprintf("big%06d", i)
		if err := h.kv.Put([]byte(k), []byte(value)); err != nil {
			t.Fatal(err)
		}
		h.model[k] = value
	}
	h.commit()
	if res := h.snapshot(); res.Skipped || res.Manifest.Bytes < 10<<20 {
		t.Fatalf("snapshot %+v, want a full backup of the ~12 MB written", res)
	}
	if calls.Load() == 0 {
		t.Fatal("writing a 12 MB backup never called Pace")
	}
	calls.Store(0)
	_, got, _, _ := loadFresh(t, ss)
	if calls.Load() == 0 {
		t.Fatal("loading a 12 MB backup never called Pace")
	}
	if !maps.Equal(got, h.model) {
		t.Fatalf("paced load holds %d keys, want the committed %d", len(got), len(h.model))
	}
}

// TestSnapshotLoadsRunOneAtATime starts the loads of two tasks into one
// state directory together: the second waits for the first (LoadSnapshot
// says why) instead of reading beside it, a load waiting its turn gives
// up when its context ends, and both tasks end up with their state.
func TestSnapshotLoadsRunOneAtATime(t *testing.T) {
	var armed atomic.Bool // once the snapshots are written
	var calls atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	ss := memStore(t, SnapshotOptions{Pace: func(ctx context.Context, _ time.Duration) error {
		if armed.Load() && calls.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}})
	src := openTestDB(t, Options{})
	value := strings.Repeat("v", 200)
	harnesses := []*snapHarness{newTaskSnapHarness(t, ss, src, "0_1", 1), newTaskSnapHarness(t, ss, src, "0_2", 2)}
	for _, h := range harnesses {
		for i := range 30_000 {
			k := fmt.Sprintf("%s-%06d", h.task.cfg.ID, i)
			if err := h.kv.Put([]byte(k), []byte(value)); err != nil {
				t.Fatal(err)
			}
			h.model[k] = value
		}
		h.commit()
	}
	if res, err := src.WriteSnapshots(context.Background(), ss); err != nil || len(res) != 2 {
		t.Fatalf("WriteSnapshots = %+v, %v; want both tasks", res, err)
	}
	armed.Store(true)

	dst := openTestDB(t, Options{})
	type result struct {
		res SnapshotLoad
		err error
	}
	load := func(ctx context.Context, id string) chan result {
		ch := make(chan result, 1)
		go func() {
			res, err := dst.LoadSnapshot(ctx, ss, id, nil)
			ch <- result{res, err}
		}()
		return ch
	}
	first := load(context.Background(), "0_1")
	<-entered // the first load is reading, held in its first pause
	second := load(context.Background(), "0_2")
	ctx, cancel := context.WithCancel(context.Background())
	third := load(ctx, "0_9")
	// A load that runs makes its temporary DB next to the task's
	// directory at once; the second must not while the first is held.
	for range 30 {
		if m, _ := filepath.Glob(filepath.Join(dst.dir, tasksDir, "0_2"+snapshotTempMark+"*")); len(m) > 0 {
			t.Fatalf("the second load started (%s) while the first was paused: the loads overlap", m[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if r := <-third; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a load waiting its turn, cancelled: %+v, %v; want context.Canceled", r.res, r.err)
	}
	close(release)
	for i, ch := range []chan result{first, second} {
		r := <-ch
		if r.err != nil || !r.res.Loaded {
			t.Fatalf("load %d: %+v, %v", i, r.res, r.err)
		}
	}
	for _, h := range harnesses {
		task := dst.NewTaskState(TaskStateConfig{ID: h.task.cfg.ID, AppID: "app", Partition: h.partition, Producer: &fakeProducer{}})
		s, err := task.Open(store.Spec{Name: "counts", Kind: store.KindKeyValue, Logged: true}, h.partition)
		if err != nil {
			t.Fatal(err)
		}
		if got := contents(t, s.(store.KeyValue)); !maps.Equal(got, h.model) {
			t.Errorf("task %s holds %d keys after the load, want %d", h.task.cfg.ID, len(got), len(h.model))
		}
		_ = task.Close()
	}
}
