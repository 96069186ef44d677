package changelog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// TestExpiryDeletesEverythingBelowTheCut: after every commit of a window
// store whose expiry cut keeps rising (writes at random live starts, late
// writes below the cut, a reopen of the state directory in between), Badger
// holds no window or index entry below the applied cut, and every window
// has its index entry. expire seeks from the applied cut, so this is the
// invariant that makes that correct.
func TestExpiryDeletesEverythingBelowTheCut(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("EXPIRE_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (EXPIRE_TEST_SEED replays)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	open := func() (*DB, *TaskState, store.Window) {
		db, err := OpenDB(dir, Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		task := db.NewTaskState(TaskStateConfig{AppID: "expire", Partition: 0})
		s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 1000}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return db, task, s.(store.Window)
	}
	db, task, w := open()
	defer func() { _ = db.Close() }()
	cut := int64(0)
	for commit := range 60 {
		if commit == 30 {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, task, w = open()
		}
		for range 20 {
			start := (cut/1000 + rng.Int64N(6) - 1) * 1000 // now and then below the cut: a late write
			if err := w.Put(fmt.Appendf(nil, "k%d", rng.IntN(15)), start, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if commit == 0 || rng.IntN(3) > 0 {
			cut += int64(rng.IntN(3)) * 1000
			if err := w.(interface{ ExpireBefore(int64) error }).ExpireBefore(cut); err != nil {
				t.Fatal(err)
			}
		}
		if err := task.Apply(nil); err != nil {
			t.Fatal(err)
		}
		checkNothingBelow(t, testBDB(t, db, 0), storeID("w", 0), cut, commit)
	}
}

func checkNothingBelow(t *testing.T, bdb *badger.DB, id []byte, cut int64, commit int) {
	t.Helper()
	data, index := 0, 0
	err := bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: withNS(nsIndex, id)})
		defer it.Close()
		ip := withNS(nsIndex, id)
		for it.Rewind(); it.Valid(); it.Next() {
			index++
			if tm := getTime(it.Item().Key()[len(ip):]); tm < cut {
				return fmt.Errorf("commit %d: index entry at %d below the cut %d", commit, tm, cut)
			}
		}
		dt := txn.NewIterator(badger.IteratorOptions{Prefix: withNS(nsData, id)})
		defer dt.Close()
		for dt.Rewind(); dt.Valid(); dt.Next() {
			data++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if data != index {
		t.Fatalf("commit %d: %d windows but %d index entries", commit, data, index)
	}
}
