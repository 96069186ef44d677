package changelog

import (
	"context"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// openCachedKV opens a logged key-value store on a fresh task.
func openCachedKV(t *testing.T, db *DB) (*TaskState, store.KeyValue) {
	t.Helper()
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: &fakeProducer{}})
	s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue, Logged: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return task, s.(store.KeyValue)
}

func commitTask(t *testing.T, task *TaskState) {
	t.Helper()
	offs, err := task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.ApplyAt(offs, nil); err != nil {
		t.Fatal(err)
	}
}

func wantGet(t *testing.T, kv store.KeyValue, key, want string) {
	t.Helper()
	v, ok, err := kv.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	if want == "" && ok || want != "" && string(v) != want {
		t.Fatalf("Get(%s) = %q,%v, want %q", key, v, ok, want)
	}
}

// A hot key is read from Badger once: later reads, across commits that
// write it, come from the cache and see every committed value.
func TestReadCacheServesCommittedValues(t *testing.T) {
	db := openTestDB(t, Options{})
	task, kv := openCachedKV(t, db)
	mustPut(t, kv, "a", "1", "b", "x")
	commitTask(t, task)
	wantGet(t, kv, "a", "1") // miss: Badger
	wantGet(t, kv, "a", "1") // hit
	wantGet(t, kv, "zz", "") // absent, cached as absent
	wantGet(t, kv, "zz", "")
	if task.cache.hits != 2 || task.cache.misses != 2 {
		t.Fatalf("hits %d misses %d, want 2 and 2", task.cache.hits, task.cache.misses)
	}
	for i, v := range []string{"2", "3", "<del>", "4"} {
		mustPut(t, kv, "a", v, "zz", v)
		commitTask(t, task)
		want := v
		if v == "<del>" {
			want = ""
		}
		hits := task.cache.hits
		wantGet(t, kv, "a", want)
		wantGet(t, kv, "zz", want)
		if task.cache.hits != hits+2 {
			t.Fatalf("commit %d: reads after the commit missed the cache (hits %d → %d)", i, hits, task.cache.hits)
		}
	}
	// An aborted transaction leaves the committed values.
	mustPut(t, kv, "a", "aborted")
	task.Discard()
	wantGet(t, kv, "a", "4")
}

// A write that does not go through this TaskState's Apply (another
// writer of the same Badger DB: a restore, a standby's tail, a rebuild)
// must be seen by the next read after the snapshot renews: the cache
// follows Badger's timestamps and drops itself.
func TestReadCacheDropsOnForeignWrite(t *testing.T) {
	db := openTestDB(t, Options{})
	task, kv := openCachedKV(t, db)
	mustPut(t, kv, "a", "1")
	commitTask(t, task)
	wantGet(t, kv, "a", "1")
	wantGet(t, kv, "a", "1")

	foreign := foreignWriter(t, task, "a")
	// Foreign write, then this task's commit of another key: the commit's
	// transaction starts past the cache's timestamp, so the cache goes.
	foreign("foreign-1")
	mustPut(t, kv, "b", "1")
	commitTask(t, task)
	wantGet(t, kv, "a", "foreign-1")

	// Commit first, then the foreign write before the next read: the
	// renewed snapshot reads past the timestamp the commit left.
	wantGet(t, kv, "a", "foreign-1")
	mustPut(t, kv, "b", "2")
	commitTask(t, task)
	foreign("foreign-2")
	wantGet(t, kv, "a", "foreign-2")

	// A reset snapshot (what restores and tails do) drops it too.
	wantGet(t, kv, "a", "foreign-2")
	foreign("foreign-3")
	task.resetSnapshot()
	wantGet(t, kv, "a", "foreign-3")
}

// foreignWriter returns a func that writes key of the task's "kv" store in
// Badger directly, as a writer other than the task's Apply would.
func foreignWriter(t *testing.T, task *TaskState, key string) func(v string) {
	k := append([]byte(nil), task.key(task.stores["kv"], []byte(key))...)
	return func(v string) {
		t.Helper()
		if err := task.tdb.bdb.Update(func(txn *badger.Txn) error { return txn.Set(k, []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
}

// The cache stays within its share of the memory budget.
func TestReadCacheIsBounded(t *testing.T) {
	db := openTestDB(t, Options{MemoryBudget: 16 << 20})
	task, kv := openCachedKV(t, db)
	val := string(make([]byte, 1000))
	for i := range 20_000 {
		mustPut(t, kv, string(rune('a'+i%26))+string(rune(i)), val)
		if i%1000 == 999 {
			commitTask(t, task)
		}
	}
	commitTask(t, task)
	wantGet(t, kv, "zz", "") // prime
	for i := range 20_000 {
		wantGet(t, kv, string(rune('a'+i%26))+string(rune(i)), val)
	}
	c := &task.cache
	var bytes int
	for _, m := range []map[string]cachedValue{c.cur, c.prev} {
		for k, v := range m {
			bytes += len(k) + len(v.v) + cacheEntryOverhead
		}
	}
	if c.limit <= 0 || bytes > c.limit {
		t.Fatalf("cache holds %d bytes, limit %d", bytes, c.limit)
	}
}

// A window store's point reads go through the cache: a window read once
// is served from it across commits that update it, and a window the store
// has expired is not returned although the cache still holds its value
// (expiry deletes keys the cache is not told about). Range reads see the
// same state.
func TestReadCacheServesWindowFetches(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: &fakeProducer{}})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 1000, Logged: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := s.(store.Window)
	put := func(key string, start int64, v string) {
		t.Helper()
		if err := w.Put([]byte(key), start, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(key string, start int64) string {
		t.Helper()
		v, ok, err := w.Fetch([]byte(key), start)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<none>"
		}
		return string(v)
	}
	put("a", 0, "1")
	put("a", 1000, "x")
	commitTask(t, task)
	for i, want := range []string{"1", "1"} {
		if got := fetch("a", 0); got != want {
			t.Fatalf("fetch %d of a@0 = %s, want %s", i, got, want)
		}
	}
	if got := fetch("b", 0); got != "<none>" {
		t.Fatalf("b@0 = %s, want none", got)
	}
	if task.cache.hits != 1 || task.cache.misses != 2 {
		t.Fatalf("hits %d misses %d, want 1 and 2", task.cache.hits, task.cache.misses)
	}
	for _, v := range []string{"2", "3"} {
		put("a", 0, v)
		put("b", 0, v)
		commitTask(t, task)
		if got, gb := fetch("a", 0), fetch("b", 0); got != v || gb != v {
			t.Fatalf("after committing %s: a@0 = %s, b@0 = %s", v, got, gb)
		}
	}
	// Expire window 0: Badger drops it at the next commit, the cache is
	// not told, and a read must still not return it.
	if err := w.ExpireBefore(1000); err != nil {
		t.Fatal(err)
	}
	commitTask(t, task)
	if got := fetch("a", 0); got != "<none>" {
		t.Fatalf("expired a@0 = %s, want none", got)
	}
	if got := fetch("a", 1000); got != "x" {
		t.Fatalf("a@1000 = %s, want x", got)
	}
	var all []string
	if err := w.FetchAll(0, 2000, func(k []byte, start int64, v []byte) bool {
		all = append(all, fmt.Sprintf("%s@%d=%s", k, start, v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0] != "a@1000=x" {
		t.Fatalf("FetchAll = %q, want [a@1000=x]", all)
	}
	if task.cache.hits < 4 {
		t.Fatalf("%d cache hits over the committed windows' reads, want them served from the cache", task.cache.hits)
	}
}

// An overlay too big for one Badger transaction takes the staged Apply,
// which commits several times: the cache follows it (reads after it hit
// and see the committed values) and still drops itself for a write that
// did not come through the task's Apply, before or after the staged one.
func TestReadCacheFollowsStagedApplies(t *testing.T) {
	db := openTestDB(t, Options{applyTxnLimit: 2})
	task, kv := openCachedKV(t, db)
	mustPut(t, kv, "a", "1", "b", "1", "c", "1")
	commitTask(t, task)
	wantGet(t, kv, "a", "1") // prime
	for round, v := range []string{"2", "3", "<del>", "4"} {
		mustPut(t, kv, "a", v, "b", v, "c", v)
		commitTask(t, task)
		want := v
		if v == "<del>" {
			want = ""
		}
		hits := task.cache.hits
		for _, k := range []string{"a", "b", "c"} {
			wantGet(t, kv, k, want)
		}
		if task.cache.hits != hits+3 {
			t.Fatalf("round %d: reads after a staged apply missed the cache (hits %d → %d)", round, hits, task.cache.hits)
		}
	}
	if st := db.Stats(); st.StagedApplies < 4 {
		t.Fatalf("%d of %d applies were staged, want the rounds' at least", st.StagedApplies, st.Applies)
	}

	foreign := foreignWriter(t, task, "a")
	// A foreign write before a staged apply of other keys.
	foreign("foreign-1")
	mustPut(t, kv, "b", "5", "c", "5", "d", "5")
	commitTask(t, task)
	wantGet(t, kv, "a", "foreign-1")
	wantGet(t, kv, "d", "5")
	// And one after it, before the next read.
	mustPut(t, kv, "b", "6", "c", "6", "d", "6")
	commitTask(t, task)
	foreign("foreign-2")
	wantGet(t, kv, "a", "foreign-2")
	wantGet(t, kv, "d", "6")
}
