package changelog

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// The store equals a reference map after any sequence of writes, commits,
// aborts, crashes (after a commit but before Apply, inside an open
// transaction, between transactions), restores into a fresh directory and
// corrupted directories. The model: what the last commit left, plus the
// uncommitted writes that only the live task sees.
func TestKafkaPropertyCommitAbortCrashRestore(t *testing.T) {
	testPropertyCommitAbortCrashRestore(t, Options{})
}

// The same with every restore into an empty task DB a sorted rebuild
// (rebuild.go) that spills its runs to files every few keys.
func TestKafkaPropertyCommitAbortCrashRestoreRebuild(t *testing.T) {
	testPropertyCommitAbortCrashRestore(t, Options{RestoreModeMinOffsets: 1, rebuildRunBytes: 300})
}

func testPropertyCommitAbortCrashRestore(t *testing.T, opts Options) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	e.opts = opts
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_CHANGELOG_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with TIDEMARK_CHANGELOG_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 7))

	dir := t.TempDir()
	n := e.start(dir)
	committed := map[string]string{}
	pending := map[string]*string{}
	view := func() map[string]string {
		m := map[string]string{}
		for k, v := range committed {
			m[k] = v
		}
		for k, v := range pending {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	var trace []string
	for i := range 150 {
		var op string
		switch x := r.IntN(100); {
		case x < 55:
			k := "k" + strconv.Itoa(r.IntN(12))
			if r.IntN(4) == 0 {
				op = "delete " + k
				mustPut(t, n.kv, k, "<del>")
				pending[k] = nil
			} else {
				v := fmt.Sprint(i)
				op = "put " + k + "=" + v
				mustPut(t, n.kv, k, v)
				pending[k] = &v
			}
		case x < 70:
			op = "commit"
			n.commit()
			committed, pending = view(), map[string]*string{}
		case x < 78:
			op = "abort"
			n.abort()
			pending = map[string]*string{}
		case x < 84:
			op = "crash after commit, before apply"
			n.crashAfterCommit()
			committed, pending = view(), map[string]*string{}
			n = e.start(dir)
		case x < 89:
			op = "crash with a transaction open"
			n.crashInTxn()
			pending = map[string]*string{}
			n = e.start(dir)
		case x < 93:
			op = "crash between transactions"
			n.stop()
			pending = map[string]*string{}
			n = e.start(dir)
		case x < 97:
			op = "restore into a fresh directory"
			n.stop()
			pending = map[string]*string{}
			dir = t.TempDir()
			n = e.start(dir)
		default:
			op = "corrupt the directory"
			n.stop()
			pending = map[string]*string{}
			corrupt(t, dir)
			n = e.start(dir)
		}
		trace = append(trace, op)
		got, want := contents(t, n.kv), view()
		if !mapsEqual(got, want) {
			t.Fatalf("after op %d (%s):\n got  %q\n want %q\nlast ops: %q", i, op, got, want, trace[max(0, len(trace)-12):])
		}
	}
	n.stop()
	fresh := e.start(t.TempDir())
	equalMaps(t, "final fresh restore", contents(t, fresh.kv), committed)
	if want := btoi(opts.RestoreModeMinOffsets > 0 && fresh.res.Records > 0); fresh.task.tdb.rebuilds != want {
		t.Fatalf("the final restore of %d records made %d sorted rebuilds, want %d", fresh.res.Records, fresh.task.tdb.rebuilds, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Window stores restore with their time index: restored windows are
// fetchable, and expiry keeps working after the restore.
func TestKafkaWindowStoreRestoresWithItsIndex(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{{"written", Options{}}, {"rebuilt", Options{RestoreModeMinOffsets: 1, rebuildRunBytes: 400}}} {
		t.Run(c.name, func(t *testing.T) { testWindowStoreRestoresWithItsIndex(t, c.opts) })
	}
}

func testWindowStoreRestoresWithItsIndex(t *testing.T, opts Options) {
	wspec := store.Spec{Name: "per-minute", Kind: store.KindWindow, Logged: true, WindowSize: 60_000, Retention: 600_000}
	e := newKafkaEnv(t, wspec, 1)
	e.opts = opts
	n := e.start(t.TempDir())
	w := n.task.stores[wspec.Name]
	win := &windowStore{t: n.task, st: w}
	for start := int64(0); start < 10*60_000; start += 60_000 {
		for _, k := range []string{"sku1", "sku2"} {
			if err := win.Put([]byte(k), start, []byte(k+"@"+strconv.FormatInt(start, 10))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := win.Put([]byte("sku2"), 0, nil); err != nil {
		t.Fatal(err)
	}
	n.commit()
	fresh := e.start(t.TempDir())
	got := map[string]string{}
	if err := fresh.task.stores[wspec.Name].fetchAll(fresh.task, func(k []byte, start int64, v []byte) {
		got[fmt.Sprintf("%s@%d", k, start)] = string(v)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 19 || got["sku1@0"] != "sku1@0" || got["sku2@0"] != "" {
		t.Fatalf("restored %d windows: %q", len(got), got)
	}
	if want := btoi(opts.RestoreModeMinOffsets > 0); fresh.task.tdb.rebuilds != want {
		t.Fatalf("%d sorted rebuilds, want %d", fresh.task.tdb.rebuilds, want)
	}
	fw := &windowStore{t: fresh.task, st: fresh.task.stores[wspec.Name]}
	if err := fw.ExpireBefore(5 * 60_000); err != nil {
		t.Fatal(err)
	}
	fresh.commit()
	var starts []int64
	if err := fw.FetchRange([]byte("sku1"), math.MinInt64, math.MaxInt64, func(start int64, _ []byte) bool {
		starts = append(starts, start)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(starts, []int64{300_000, 360_000, 420_000, 480_000, 540_000}) {
		t.Fatalf("after expiry, sku1 windows start at %v", starts)
	}
	if n := countPrefix(t, fresh.db, withNS(nsIndex, fresh.task.stores[wspec.Name].id)); n != 10 {
		t.Fatalf("%d index entries after expiry, want 10", n)
	}
}

func (st *storeState) fetchAll(t *TaskState, fn func(k []byte, start int64, v []byte)) error {
	w := &windowStore{t: t, st: st}
	return w.FetchAll(math.MinInt64, math.MaxInt64, func(k []byte, start int64, v []byte) bool { fn(k, start, v); return true })
}

func TestKafkaSessionStoreRestoresAndReportsProgress(t *testing.T) {
	spec := store.Spec{Name: "visits", Kind: store.KindSession, Logged: true, Retention: 600_000}
	e := newKafkaEnv(t, spec, 1)
	n := e.start(t.TempDir())
	ss := &sessionStore{t: n.task, st: n.task.stores[spec.Name]}
	for i := int64(0); i < 50; i++ {
		if err := ss.Put([]byte(fmt.Sprintf("user-%d", i%5)), i*1000, i*1000+500, []byte(strconv.FormatInt(i, 10))); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.Remove([]byte("user-0"), 0, 500); err != nil {
		t.Fatal(err)
	}
	n.commit()

	db := openTestDB(t, Options{Logger: quietLog})
	var last RestoreProgress
	calls := 0
	opts := e.restoreOpts()
	opts.Progress = func(p RestoreProgress) { last = p; calls++ }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := db.Restore(ctx, []RestoreTarget{{Store: spec.Name, Partition: 0, Topic: e.topic, Kind: store.KindSession}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !last.Done || last.Restored != 50 || last.Remaining != 0 || calls == 0 || res.Records != 50 {
		t.Fatalf("last progress %+v after %d calls, result %+v; want done with the 50 records (49 sessions and a tombstone)", last, calls, res)
	}
	var got []string
	err = db.Scan(StoreInstance{Name: spec.Name, Partition: 0, Kind: store.KindSession}, ScanOptions{Key: []byte("user-0")}, func(en Entry) bool {
		got = append(got, fmt.Sprintf("[%d,%d]=%s", en.Start, en.End, en.Value))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[5000,5500]=5", "[10000,10500]=10", "[15000,15500]=15", "[20000,20500]=20", "[25000,25500]=25",
		"[30000,30500]=30", "[35000,35500]=35", "[40000,40500]=40", "[45000,45500]=45"}
	if !slices.Equal(got, want) {
		t.Fatalf("restored sessions of user-0 = %q, want %q", got, want)
	}
}
