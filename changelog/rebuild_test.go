package changelog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// A sorted rebuild leaves the task DB holding exactly what writing the
// same sets and deletes in order would: the last write of each key wins,
// deleted keys are gone, set-but-empty values stay, and the meta keys the
// DB held before survive StreamWriter's drop. Its tables all sit below
// level 0, so nothing is left to compact; the run files are removed; the
// DB takes writes afterwards. In memory and spilled to many runs.
func TestRebuildMatchesWritesInOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_REBUILD_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with TIDEMARK_REBUILD_SEED=%d)", seed, seed)
	for _, c := range []struct {
		name     string
		runBytes int64
		wantRuns bool
	}{{"in memory", 0, false}, {"spilled runs", 16 << 10, true}} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			db := openTestDB(t, Options{Logger: quietLog})
			tdb := testTaskDB(t, db, 0)
			offKey, otherKey := offsetKey("app-stock-changelog", 0), offsetKey("app-stock-changelog", 1)
			if err := tdb.bdb.Update(func(txn *badger.Txn) error {
				if err := txn.Set(otherKey, []byte("kept")); err != nil {
					return err
				}
				return txn.Set(offKey, []byte("before"))
			}); err != nil {
				t.Fatal(err)
			}
			want := dump(t, tdb.bdb)
			if len(want) != 3 { // the format and offset keys
				t.Fatalf("before the rebuild: %q", want)
			}
			if has, err := tdb.holdsData(); has || err != nil {
				t.Fatalf("holdsData of a DB with meta keys only = %v, %v", has, err)
			}
			if ok, err := tdb.enterRestoreMode(); !ok || err != nil {
				t.Fatalf("enterRestoreMode = %v, %v", ok, err)
			}
			rb, err := newRebuild(tdb, c.runBytes)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20_000 {
				k := string(withNS(nsData, []byte(fmt.Sprintf("key-%05d", r.IntN(3000)))))
				switch x := r.IntN(10); {
				case i%7000 == 0: // larger than an arena chunk
					v := fmt.Sprintf("v%d-%s", i, make([]byte, arenaChunk+r.IntN(100)))
					want[k] = v
					err = rb.Set([]byte(k), []byte(v))
				case x < 2:
					delete(want, k)
					err = rb.Delete([]byte(k))
				case x < 3:
					want[k] = ""
					err = rb.SetEntry(&badger.Entry{Key: []byte(k)})
				case x < 4:
					want[string(offKey)] = "during-" + strconv.Itoa(i)
					err = rb.Set(offKey, []byte(want[string(offKey)]))
				default:
					v := fmt.Sprintf("v%d-%s", i, make([]byte, r.IntN(40)))
					want[k] = v
					err = rb.Set([]byte(k), []byte(v))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := len(rb.files) > 0; got != c.wantRuns {
				t.Fatalf("spilled %d runs; want runs on disk: %v", len(rb.files), c.wantRuns)
			}
			if err := rb.finish(context.Background(), newPacer(nil)); err != nil {
				t.Fatal(err)
			}
			if tmp, _ := filepath.Glob(filepath.Join(db.dir, tasksDir, "*"+rebuildTempMark+"*")); len(tmp) > 0 {
				t.Fatalf("run files left: %v", tmp)
			}
			if l := levelTables(tdb); l[0] != 0 || l[1] == 0 {
				t.Fatalf("after the rebuild: %d tables in level 0, %d below; want none and some", l[0], l[1])
			}
			if err := tdb.leaveRestoreMode(); err != nil {
				t.Fatal(err)
			}
			sameContent(t, "the rebuilt task DB", dump(t, tdb.bdb), want)

			k := withNS(nsData, []byte("key-00001"))
			if err := tdb.bdb.Update(func(txn *badger.Txn) error { return txn.Set(k, []byte("after")) }); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = "after"
			sameContent(t, "the rebuilt task DB after a write", dump(t, tdb.bdb), want)
		})
	}
}

// dump reads every key of bdb.
func dump(t *testing.T, bdb *badger.DB) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			m[string(it.Item().Key())] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameContent reports the first few differences between two large maps.
func sameContent(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diff []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diff = append(diff, fmt.Sprintf("%q missing", k))
		} else if g != v {
			diff = append(diff, fmt.Sprintf("%q = %q, want %q", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%q not expected", k))
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Fatalf("%s: %d keys, want %d; %d differences, first: %q", what, len(got), len(want), len(diff), diff[:min(len(diff), 5)])
	}
}
