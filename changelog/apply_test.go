package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/store"
)

// fakeProducer acknowledges records at consecutive offsets per partition,
// or on partition moveTo when set (a partitioner that ignores Partition).
type fakeProducer struct {
	next    map[TopicPartition]int64
	records []*kgo.Record
	moveTo  *int32
	fail    error
}

func (p *fakeProducer) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if p.fail != nil {
		promise(r, p.fail)
		return
	}
	if p.next == nil {
		p.next = map[TopicPartition]int64{}
	}
	if p.moveTo != nil {
		r.Partition = *p.moveTo
	}
	tp := TopicPartition{r.Topic, r.Partition}
	r.Offset = p.next[tp]
	p.next[tp] += 2 // leave room for a transaction marker, as Kafka does
	p.records = append(p.records, r)
	promise(r, nil)
}

func contents(t *testing.T, kv store.KeyValue) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := kv.Range(nil, nil, func(k, v []byte) bool { m[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	return m
}

func equalMaps(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
}

func mustPut(t *testing.T, kv store.KeyValue, kvs ...string) {
	t.Helper()
	for i := 0; i < len(kvs); i += 2 {
		var v []byte
		if kvs[i+1] != "<del>" {
			v = []byte(kvs[i+1])
		}
		if err := kv.Put([]byte(kvs[i]), v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFlushProducesLatestValuePerKeyAndApplyRecordsOffsets(t *testing.T) {
	db := openTestDB(t, Options{})
	p := &fakeProducer{}
	task := db.NewTaskState(TaskStateConfig{AppID: "shop", Partition: 1, Producer: p})
	s, err := task.Open(store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	kv := s.(store.KeyValue)
	mustPut(t, kv, "sku1", "5", "sku1", "4", "sku2", "1", "sku2", "<del>")
	offs, err := task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.records {
		if r.Topic != "shop-stock-changelog" || r.Partition != 1 {
			t.Fatalf("record on %s/%d", r.Topic, r.Partition)
		}
		v := string(r.Value)
		if r.Value == nil {
			v = "<tombstone>"
		}
		got = append(got, string(r.Key[1:])+"="+v)
	}
	if !slices.Equal(got, []string{"sku1=4", "sku2=<tombstone>"}) {
		t.Fatalf("changelog records = %q, want the latest value per key", got)
	}
	if err := kv.Put([]byte("late"), []byte("x")); !errors.Is(err, ErrFlushed) {
		t.Fatalf("Put after Flush = %v, want ErrFlushed", err)
	}
	tp := TopicPartition{"shop-stock-changelog", 1}
	if offs[tp] != 3 {
		t.Fatalf("Flush offsets = %v, want %s at 3 (last offset 2, plus one)", offs, tp)
	}
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	a, ok, err := db.AppliedOffset(tp)
	if err != nil || !ok || a.Offset != 3 {
		t.Fatalf("AppliedOffset = %+v, %v, %v", a, ok, err)
	}
	equalMaps(t, "after apply", contents(t, kv), map[string]string{"sku1": "4"})
}

// A rebuild empties the store and forgets its applied offset in one step,
// so a process that dies before the rebuild records progress starts the
// next restore from the beginning, not from the old offset.
func TestWipeForgetsTheAppliedOffset(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "shop", Partition: 1, Producer: &fakeProducer{}})
	s, err := task.Open(store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s.(store.KeyValue), "sku1", "5")
	offs, err := task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"shop-stock-changelog", 1}
	tdbs, err := db.pinAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, tdb := range tdbs {
		if err := tdb.wipe(storeID("stock", 1), tp); err != nil {
			t.Fatal(err)
		}
	}
	if a, ok, err := db.AppliedOffset(tp); err != nil || ok {
		t.Fatalf("AppliedOffset after wipe = %+v, %v, %v; want none", a, ok, err)
	}
}

func TestApplyRefusesLoggedWritesThatWereNotFlushed(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: &fakeProducer{}})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 0)
	mustPut(t, s.(store.KeyValue), "k", "v")
	if err := task.Apply(nil); !errors.Is(err, ErrNotFlushed) {
		t.Fatalf("Apply without Flush = %v, want ErrNotFlushed", err)
	}
}

func TestDiscardDropsTheOverlay(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: &fakeProducer{}})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 0)
	kv := s.(store.KeyValue)
	mustPut(t, kv, "a", "1")
	offs, _ := task.Flush(context.Background())
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	mustPut(t, kv, "a", "2", "b", "2", "a", "<del>")
	equalMaps(t, "read your writes", contents(t, kv), map[string]string{"b": "2"})
	if _, err := task.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	task.Discard() // the transaction aborted
	equalMaps(t, "after discard", contents(t, kv), map[string]string{"a": "1"})
	mustPut(t, kv, "c", "3") // writable again
}

func TestFlushFailsOnAWrongPartitionOrAProduceError(t *testing.T) {
	for _, c := range []struct {
		name string
		p    *fakeProducer
		want error
	}{
		{"partitioner ignores Record.Partition", &fakeProducer{moveTo: new(int32(0))}, ErrWrongPartition},
		{"produce error", &fakeProducer{fail: context.DeadlineExceeded}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openTestDB(t, Options{})
			task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 3, Producer: c.p})
			s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 3)
			mustPut(t, s.(store.KeyValue), "k", "v")
			if _, err := task.Flush(context.Background()); !errors.Is(err, c.want) {
				t.Fatalf("Flush = %v, want %v", err, c.want)
			}
		})
	}
}

// A staged Apply interrupted at each step: before its marker the Apply
// did not happen (old state, old offsets); after it, reopening finishes it
// (new state, new offsets). Never a mix.
func TestStagedApplyCrashLeavesOldOrNewStateNeverAMix(t *testing.T) {
	tp := TopicPartition{"a-s-changelog", 0}
	before := map[string]string{"a": "1", "b": "1", "c": "1"}
	after := map[string]string{"a": "2", "c": "1", "d": "2", "e": "2"}
	for _, c := range []struct {
		step       string
		want       map[string]string
		wantOffset int64
	}{
		{"staged", before, 5},
		{"marked", after, 9},
		{"copied", after, 9},
	} {
		t.Run("crash after "+c.step, func(t *testing.T) {
			dir := t.TempDir()
			failAt := ""
			opts := Options{applyTxnLimit: 2, applyHook: func(step string) error {
				if step == failAt {
					return errors.New("crash at " + step)
				}
				return nil
			}}
			db, err := OpenDB(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			p := &fakeProducer{}
			task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: p})
			s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 0)
			kv := s.(store.KeyValue)
			mustPut(t, kv, "a", "1", "b", "1", "c", "1")
			if _, err := task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := task.Apply(ChangelogOffsets{tp: 5}); err != nil {
				t.Fatal(err)
			}
			mustPut(t, kv, "a", "2", "b", "<del>", "d", "2", "e", "2")
			if _, err := task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			failAt = c.step
			if err := task.Apply(ChangelogOffsets{tp: 9}); err == nil {
				t.Fatal("Apply survived the injected crash")
			}
			_ = task.Close()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			db, err = OpenDB(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			task = db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: p})
			s, _ = task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 0)
			equalMaps(t, "state after reopen", contents(t, s.(store.KeyValue)), c.want)
			a, _, err := db.AppliedOffset(tp)
			if err != nil || a.Offset != c.wantOffset {
				t.Fatalf("applied offset = %d, %v; want %d", a.Offset, err, c.wantOffset)
			}
			if n := countPrefix(t, db, []byte{nsStaged}) + countPrefix(t, db, metaKey(metaApplied)); n != 0 {
				t.Fatalf("%d staging keys left after recovery", n)
			}
		})
	}
}

func countPrefix(t *testing.T, db *DB, prefix []byte) int {
	t.Helper()
	n := 0
	tdbs, err := db.pinAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, tdb := range tdbs {
		_ = tdb.bdb.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				n++
			}
			return nil
		})
	}
	return n
}

func TestWindowExpiryIsAppliedThroughTheIndexAndPersists(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0})
	spec := store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 10, Retention: 100}
	s, _ := task.Open(spec, 0)
	w := s.(store.Window)
	for start := int64(0); start < 100; start += 10 {
		if err := w.Put([]byte("k"), start, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if err := w.ExpireBefore(50); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, db, withNS(nsData, storeID("w", 0))); n != 5 {
		t.Fatalf("%d windows in Badger after expiry, want 5", n)
	}
	if n := countPrefix(t, db, withNS(nsIndex, storeID("w", 0))); n != 5 {
		t.Fatalf("%d index entries after expiry, want 5", n)
	}
	_ = task.Close()
	_ = db.Close()
	db, err = OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task = db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0})
	s, _ = task.Open(spec, 0)
	if err := s.(store.Window).Put([]byte("k"), 40, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.(store.Window).Fetch([]byte("k"), 40); ok {
		t.Fatal("a write below the persisted expiry cut is visible after reopen")
	}
}

func TestOpenDBMovesACorruptDirectoryAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db, err := OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue}, 0)
	mustPut(t, s.(store.KeyValue), "k", "v")
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	tdir := taskDirOf(t, dir)
	if err := os.WriteFile(filepath.Join(tdir, "MANIFEST"), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDB(dir, Options{KeepCorrupt: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenDB(KeepCorrupt) of a corrupt dir = %v, want ErrCorrupt", err)
	}
	db, err = OpenDB(dir, Options{})
	if err != nil {
		t.Fatalf("OpenDB of a corrupt dir: %v", err)
	}
	defer db.Close()
	if stores, _ := db.Stores(); len(stores) != 0 {
		t.Fatalf("fresh DB lists stores %v", stores)
	}
	aside, _ := filepath.Glob(tdir + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("corrupt task DB not moved aside: %v", aside)
	}
}

func TestCheckpointReportsWhatItMadeDurable(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue}, 0)
	for i := range 100 {
		mustPut(t, s.(store.KeyValue), fmt.Sprintf("key-%03d", i), "0123456789")
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	c, err := db.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Bytes < 100*10 || c.Duration <= 0 {
		t.Fatalf("checkpoint cost %+v after applying 100 entries of 10-byte values", c)
	}
	if c, _ = db.Checkpoint(context.Background()); c.Bytes != 0 {
		t.Fatalf("second checkpoint with nothing applied reports %d bytes", c.Bytes)
	}
}

func TestApplyRecordsTheOffsetsOfItsFlush(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: &fakeProducer{}})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}, 0)
	mustPut(t, s.(store.KeyValue), "k", "1", "j", "2")
	ctx := context.Background()
	offs, err := task.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	if a, ok, _ := db.AppliedOffset(TopicPartition{"a-s-changelog", 0}); !ok || a.Offset != 3 {
		t.Fatalf("applied offset %+v, %v; want 3", a, ok)
	}
	mustPut(t, s.(store.KeyValue), "k", "3")
	if _, err := task.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	task.Discard()
	equalMaps(t, "after discard", contents(t, s.(store.KeyValue)), map[string]string{"k": "1", "j": "2"})
}

func TestVerifyChecksumsFindsADamagedTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db, err := OpenDB(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0})
	s, _ := task.Open(store.Spec{Name: "s", Kind: store.KindKeyValue}, 0)
	for i := range 2000 {
		mustPut(t, s.(store.KeyValue), fmt.Sprintf("key-%05d", i), "some value bytes")
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if err := testBDB(t, db, 0).Flatten(1); err != nil { // force the memtable into a table
		t.Fatal(err)
	}
	_ = db.Close()
	tables, _ := filepath.Glob(filepath.Join(taskDirOf(t, dir), "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table written")
	}
	f, err := os.OpenFile(tables[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("rot rot rot rot"), 100); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := OpenDB(dir, Options{VerifyChecksums: true, KeepCorrupt: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenDB with a damaged table = %v, want ErrCorrupt", err)
	}
}
