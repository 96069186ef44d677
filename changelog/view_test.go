package changelog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

func pos(topic string, partition int32, offset int64) InputPosition {
	return InputPosition{topic: {partition: offset}}
}

func openSnapshot(t *testing.T, db *DB) *Snapshot {
	t.Helper()
	snap, err := db.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snap.Close)
	return snap
}

func readSnapshotKV(t *testing.T, snap *Snapshot, name string, partition int32) map[string]string {
	t.Helper()
	kv, err := snap.KeyValue(name, partition)
	if err != nil {
		t.Fatal(err)
	}
	return contents(t, kv)
}

func snapshotPosition(t *testing.T, snap *Snapshot, name string, partition int32) InputPosition {
	t.Helper()
	p, found, err := snap.Position(name, partition)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return nil
	}
	return p
}

// openKV opens a key-value store of task.
func openKV(t *testing.T, task *TaskState, name string, logged bool) store.KeyValue {
	t.Helper()
	s, err := task.Open(store.Spec{Name: name, Kind: store.KindKeyValue, Logged: logged}, task.cfg.Partition)
	if err != nil {
		t.Fatal(err)
	}
	return s.(store.KeyValue)
}

func TestSnapshotReadsTheCommittedStateOnly(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "shop", Partition: 1, Producer: &fakeProducer{}})
	kv := openKV(t, task, "stock", true)
	tp := TopicPartition{"shop-stock-changelog", 1}

	before := openSnapshot(t, db)
	mustPut(t, kv, "a", "1", "b", "1")
	offs, err := task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.ApplyAt(offs, pos("orders", 1, 2)); err != nil {
		t.Fatal(err)
	}
	mustPut(t, kv, "a", "2", "b", "<del>", "c", "2") // the next transaction, open

	first := openSnapshot(t, db)
	equalMaps(t, "snapshot while a transaction is open", readSnapshotKV(t, first, "stock", 1), map[string]string{"a": "1", "b": "1"})
	if got := snapshotPosition(t, first, "stock", 1); got.String() != "orders:1:2" {
		t.Fatalf("position = %q, want orders:1:2", got)
	}
	if a, found, err := first.AppliedOffset(tp); err != nil || !found || a.Offset != offs[tp] {
		t.Fatalf("applied offset = %+v, %v, %v; want %d", a, found, err, offs[tp])
	}
	equalMaps(t, "snapshot opened before the first Apply", readSnapshotKV(t, before, "stock", 1), map[string]string{})
	if got := snapshotPosition(t, before, "stock", 1); got != nil {
		t.Fatalf("position before the first Apply = %q, want none", got)
	}

	offs, err = task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.ApplyAt(offs, pos("orders", 1, 5)); err != nil {
		t.Fatal(err)
	}
	equalMaps(t, "an older snapshot after the next Apply", readSnapshotKV(t, first, "stock", 1), map[string]string{"a": "1", "b": "1"})
	second := openSnapshot(t, db)
	equalMaps(t, "a snapshot after the next Apply", readSnapshotKV(t, second, "stock", 1), map[string]string{"a": "2", "c": "2"})
	if got := snapshotPosition(t, second, "stock", 1); got.String() != "orders:1:5" {
		t.Fatalf("position = %q, want orders:1:5", got)
	}

	// An abort leaves Badger, and so the snapshots, as they were.
	mustPut(t, kv, "a", "3")
	task.Discard()
	equalMaps(t, "a snapshot after an abort", readSnapshotKV(t, openSnapshot(t, db), "stock", 1), map[string]string{"a": "2", "c": "2"})

	// Apply without a position keeps the recorded one; RecordPosition
	// replaces or deletes it.
	mustPut(t, kv, "d", "4")
	if offs, err = task.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	if got := snapshotPosition(t, openSnapshot(t, db), "stock", 1); got.String() != "orders:1:5" {
		t.Fatalf("position after Apply without one = %q, want orders:1:5 still", got)
	}
	if err := task.RecordPosition(pos("orders", 1, 9)); err != nil {
		t.Fatal(err)
	}
	if got := snapshotPosition(t, openSnapshot(t, db), "stock", 1); got.String() != "orders:1:9" {
		t.Fatalf("position after RecordPosition = %q, want orders:1:9", got)
	}
	if err := task.RecordPosition(nil); err != nil {
		t.Fatal(err)
	}
	if got := snapshotPosition(t, openSnapshot(t, db), "stock", 1); got != nil {
		t.Fatalf("position after RecordPosition(nil) = %q, want none", got)
	}
}

func TestSnapshotStoresRefuseWrites(t *testing.T) {
	db := openTestDB(t, Options{})
	snap := openSnapshot(t, db)
	kv, _ := snap.KeyValue("kv", 0)
	w, _ := snap.Window("w", 0)
	s, _ := snap.Session("s", 0)
	for name, err := range map[string]error{
		"kv put":         kv.Put([]byte("k"), []byte("v")),
		"kv delete":      kv.Delete([]byte("k")),
		"window put":     w.Put([]byte("k"), 0, []byte("v")),
		"window expire":  w.ExpireBefore(10),
		"session put":    s.Put([]byte("k"), 0, 1, []byte("v")),
		"session remove": s.Remove([]byte("k"), 0, 1),
		"session expire": s.ExpireBefore(10),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
}

func TestSnapshotOfAClosedDBIsErrClosed(t *testing.T) {
	db, err := OpenDB(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Snapshot(context.Background()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Snapshot of a closed DB: %v, want store.ErrClosed", err)
	}
}

// A model of the committed windows and sessions, checked against a
// snapshot's reads after random puts, removes, expiry, applies (both
// paths) and aborts: the snapshot reads exactly what was applied, with the
// persisted expiry cut hiding what lies below it.
func TestPropertySnapshotWindowAndSessionReadsMatchTheAppliedModel(t *testing.T) {
	for _, txnLimit := range []int{0, 3} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("txnLimit=%d/seed=%d", txnLimit, seed), func(t *testing.T) {
				checkSnapshotModel(t, rand.New(rand.NewPCG(seed, 7)), txnLimit)
			})
		}
	}
}

type sessKey struct {
	key        string
	start, end int64
}

func checkSnapshotModel(t *testing.T, r *rand.Rand, txnLimit int) {
	db := openTestDB(t, Options{applyTxnLimit: txnLimit})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 2})
	ws, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := task.Open(store.Spec{Name: "s", Kind: store.KindSession}, 2)
	if err != nil {
		t.Fatal(err)
	}
	win, sess := ws.(store.Window), ss.(store.Session)
	keys := []string{"a", "b", "c\x00d", ""}
	applied := struct {
		win            map[winKey]string
		sess           map[sessKey]string
		winCut, sesCut int64
	}{map[winKey]string{}, map[sessKey]string{}, math.MinInt64, math.MinInt64}
	pending, pendingS := map[winKey]string{}, map[sessKey]string{}
	winCut, sesCut := applied.winCut, applied.sesCut
	for round := range 40 {
		for range r.IntN(8) {
			k := keys[r.IntN(len(keys))]
			start := int64(r.IntN(20)) * 10
			v := strconv.Itoa(round)
			if r.IntN(5) == 0 {
				v = ""
			}
			var wv []byte
			if v != "" {
				wv = []byte(v)
			}
			if err := win.Put([]byte(k), start, wv); err != nil {
				t.Fatal(err)
			}
			if start >= winCut {
				pending[winKey{k, start}] = v
			}
			end := start + int64(r.IntN(15))
			if v == "" {
				err = sess.Remove([]byte(k), start, end)
			} else {
				err = sess.Put([]byte(k), start, end, wv)
			}
			if err != nil {
				t.Fatal(err)
			}
			if end >= sesCut {
				pendingS[sessKey{k, start, end}] = v
			}
		}
		if r.IntN(6) == 0 {
			winCut = max(winCut, int64(r.IntN(10))*10)
			sesCut = max(sesCut, int64(r.IntN(10))*10)
			if err := win.ExpireBefore(winCut); err != nil {
				t.Fatal(err)
			}
			if err := sess.ExpireBefore(sesCut); err != nil {
				t.Fatal(err)
			}
		}
		if r.IntN(4) == 0 { // abort
			task.Discard()
			clear(pending)
			clear(pendingS)
			winCut, sesCut = applied.winCut, applied.sesCut
			continue
		}
		if err := task.ApplyAt(nil, pos("in", 2, int64(round))); err != nil {
			t.Fatal(err)
		}
		for k, v := range pending {
			applied.win[k] = v
		}
		for k, v := range pendingS {
			applied.sess[k] = v
		}
		clear(pending)
		clear(pendingS)
		applied.winCut, applied.sesCut = winCut, sesCut
		checkSnapshotAgainst(t, db, applied.win, applied.sess, applied.winCut, applied.sesCut, round)
	}
}

func checkSnapshotAgainst(t *testing.T, db *DB, wins map[winKey]string, sess map[sessKey]string, winCut, sesCut int64, round int) {
	t.Helper()
	snap, err := db.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if got := snapshotPosition(t, snap, "w", 2).String(); got != fmt.Sprintf("in:2:%d", round) {
		t.Fatalf("round %d: window store position %q", round, got)
	}
	w, err := snap.Window("w", 2)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for k, v := range wins {
		if v != "" && k.start >= winCut {
			want = append(want, fmt.Sprintf("%q@%d=%s", k.key, k.start, v))
		}
	}
	slices.Sort(want)
	var got []string
	if err := w.FetchAll(math.MinInt64, math.MaxInt64, func(k []byte, start int64, v []byte) bool {
		got = append(got, fmt.Sprintf("%q@%d=%s", k, start, v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("round %d: snapshot FetchAll = %q\nwant %q", round, got, want)
	}
	for _, key := range []string{"a", "c\x00d"} {
		var got, want []string
		for k, v := range wins {
			if k.key == key && v != "" && k.start >= winCut && k.start >= 50 && k.start <= 120 {
				want = append(want, fmt.Sprintf("%04d=%s", k.start, v))
			}
		}
		slices.Sort(want)
		if err := w.FetchRange([]byte(key), 50, 120, func(start int64, v []byte) bool {
			got = append(got, fmt.Sprintf("%04d=%s", start, v))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: snapshot FetchRange(%q, 50, 120) = %q, want %q", round, key, got, want)
		}
	}
	s, err := snap.Session("s", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", ""} {
		var got, want []string
		for k, v := range sess {
			if k.key == key && v != "" && k.end >= sesCut && k.end >= 40 && k.start <= 150 {
				want = append(want, fmt.Sprintf("%020d/%020d=%s", k.end, k.start, v))
			}
		}
		slices.Sort(want) // FindSessions orders by end, then start
		if err := s.FindSessions([]byte(key), 40, 150, func(start, end int64, v []byte) bool {
			got = append(got, fmt.Sprintf("%020d/%020d=%s", end, start, v))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: snapshot FindSessions(%q, 40, 150) = %q, want %q", round, key, got, want)
		}
	}
}

// A staged Apply writes its commit point (the applied marker, with the
// offsets and the position) before it copies the data into place: a
// snapshot opened in between would see a position ahead of its data.
// Readers racing a writer whose every Apply is staged (and slowed down
// between mark and copy) must always see every key at exactly the
// position's round.
func TestStagedApplyNeverShowsAReaderAPositionAheadOfItsData(t *testing.T) {
	db := openTestDB(t, Options{Logger: quietLog, applyTxnLimit: 4, applyHook: func(step string) error {
		if step == "marked" || step == "copied" {
			time.Sleep(time.Millisecond)
		}
		return nil
	}})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0})
	kv := openKV(t, task, "kv", false)
	// At least minRounds applies, and more while the readers (slow on a
	// loaded machine) have read fewer snapshots than that.
	const keys, minRounds, maxRounds = 24, 40, 2000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	var reads atomic.Int64
	for range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := checkRound(ctx, db, keys); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		})
	}
	rounds := 0
	for rounds < minRounds || (reads.Load() < minRounds && rounds < maxRounds) {
		rounds++
		for k := range keys {
			mustPut(t, kv, fmt.Sprintf("k%02d", k), strconv.Itoa(rounds))
		}
		if err := task.ApplyAt(nil, pos("in", 0, int64(rounds))); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := db.Stats(); st.StagedApplies != int64(rounds) {
		t.Fatalf("%d of %d applies were staged, want all", st.StagedApplies, rounds)
	}
	if n := reads.Load(); n < minRounds {
		t.Fatalf("readers read %d snapshots over %d applies: the race was hardly run", n, rounds)
	}
}

// checkRound reads one snapshot: every key must hold the round its
// position names (or none before the first Apply).
func checkRound(ctx context.Context, db *DB, keys int) error {
	snap, err := db.Snapshot(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return err
	}
	defer snap.Close()
	p, found, err := snap.Position("kv", 0)
	if err != nil {
		return err
	}
	want := ""
	if found {
		want = strconv.FormatInt(p["in"][0], 10)
	}
	kv, err := snap.KeyValue("kv", 0)
	if err != nil {
		return err
	}
	for k := range keys {
		v, ok, err := kv.Get(fmt.Appendf(nil, "k%02d", k))
		if err != nil {
			return err
		}
		if string(v) != want || ok != found {
			return fmt.Errorf("snapshot at position %q holds k%02d=%q (found %v): data and position disagree", p, k, v, ok)
		}
	}
	return nil
}

// A staged Apply that stopped after its commit point (its copy failed)
// leaves the marker until the task DB's next open finishes it: snapshots wait rather than
// show the new position over part of the data.
func TestSnapshotWaitsOutAStagedApplyLeftUnfinished(t *testing.T) {
	fail := false
	dir := t.TempDir()
	db, err := OpenDB(dir, Options{Logger: quietLog, applyTxnLimit: 1, applyHook: func(step string) error {
		if fail && step == "marked" {
			return errors.New("copy failed")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0})
	kv := openKV(t, task, "kv", false)
	mustPut(t, kv, "a", "1", "b", "1")
	if err := task.ApplyAt(nil, pos("in", 0, 1)); err != nil {
		t.Fatal(err)
	}
	fail = true
	mustPut(t, kv, "a", "2", "b", "2")
	if err := task.ApplyAt(nil, pos("in", 0, 2)); err == nil {
		t.Fatal("Apply survived its failed copy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if snap, err := db.Snapshot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			snap.Close()
		}
		t.Fatalf("Snapshot with an unfinished staged apply: %v, want it to wait until its context ends", err)
	}
	_ = task.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// Snapshots read the task DBs of open tasks; opening the task's store
	// opens its DB, which finishes the apply.
	openKV(t, db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0}), "kv", false)
	snap := openSnapshot(t, db)
	equalMaps(t, "after OpenDB finished the apply", readSnapshotKV(t, snap, "kv", 0), map[string]string{"a": "2", "b": "2"})
	if got := snapshotPosition(t, snap, "kv", 0).String(); got != "in:0:2" {
		t.Fatalf("position after OpenDB finished the apply = %q, want in:0:2", got)
	}
}

func TestPositionStringParseCoversMerge(t *testing.T) {
	p, err := ParsePosition("orders:1:42,orders:0:7", "carts:3:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "carts:3:0,orders:0:7,orders:1:42" {
		t.Fatalf("String = %q", got)
	}
	back, err := decodePosition(encodePosition(p))
	if err != nil || back.String() != p.String() {
		t.Fatalf("decode(encode) = %q, %v", back, err)
	}
	if _, err := decodePosition(encodePosition(p)[:5]); err == nil {
		t.Fatal("decoded a cut position")
	}
	for _, c := range []struct {
		name  string
		bound string
		want  bool
	}{
		{"an empty bound is always covered", "", true},
		{"at the bound", "orders:1:42", true},
		{"past the bound", "orders:1:40,orders:0:7", true},
		{"behind on one partition", "orders:1:43", false},
		{"an input partition the position lacks", "orders:2:1", false},
		{"a topic the position lacks", "payments:0:0", false},
	} {
		b, err := ParsePosition(c.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Covers(b); got != c.want {
			t.Errorf("%s: %s covers %s = %v, want %v", c.name, p, b, got, c.want)
		}
	}
	p.Merge(InputPosition{"orders": {1: 10, 5: 1}})
	if got := p.String(); got != "carts:3:0,orders:0:7,orders:1:42,orders:5:1" {
		t.Fatalf("after Merge: %q (keeps the larger offset, adds new partitions)", got)
	}
	for _, bad := range []string{"orders:1", "orders:x:1", "orders:1:-1", ":1:1", "a:1:1:1"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) accepted it", bad)
		}
	}
}
