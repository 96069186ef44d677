package changelog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// cancelAfter is a context whose Err turns to Canceled after n calls: a
// cancel that arrives in the middle of the work that checks it.
type cancelAfter struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestRebuildStopsWhenCancelled: a shutdown or revocation stops a sorted
// rebuild's merge, unpaced too (a lone instance restores unpaced): before
// the merge it leaves the task DB as it was, during it it stops at the
// next write; either way the run files are removed. The merge used to run
// to its end whatever the context said: SIGTERM during the merge of a
// 1.5M-record restore took 3.4 s to exit.
func TestRebuildStopsWhenCancelled(t *testing.T) {
	for _, c := range []struct {
		name   string
		checks int64 // Err calls that still answer nil
	}{{"before the merge", 0}, {"during the merge", 1}} {
		t.Run(c.name, func(t *testing.T) {
			db := openTestDB(t, Options{Logger: quietLog})
			tdb := testTaskDB(t, db, 0)
			offKey := offsetKey("app-stock-changelog", 0)
			if err := tdb.bdb.Update(func(txn *badger.Txn) error { return txn.Set(offKey, []byte("before")) }); err != nil {
				t.Fatal(err)
			}
			before := dump(t, tdb.bdb)
			if ok, err := tdb.enterRestoreMode(); !ok || err != nil {
				t.Fatalf("enterRestoreMode = %v, %v", ok, err)
			}
			rb, err := newRebuild(tdb, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			val := make([]byte, 200)
			for i := range 20_000 { // 4 MB: several StreamWriter writes
				if err := rb.Set(withNS(nsData, []byte(fmt.Sprintf("key-%06d", i))), val); err != nil {
					t.Fatal(err)
				}
			}
			if len(rb.files) == 0 {
				t.Fatal("no runs spilled")
			}
			ctx := &cancelAfter{Context: context.Background()}
			ctx.n.Store(c.checks)
			err = rb.finish(ctx, newPacer(nil))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("finish with a cancelled context = %v, want context.Canceled", err)
			}
			if tmp, _ := filepath.Glob(filepath.Join(db.dir, tasksDir, "*"+rebuildTempMark+"*")); len(tmp) > 0 {
				t.Fatalf("run files left: %v", tmp)
			}
			if err := tdb.leaveRestoreMode(); err != nil {
				t.Fatal(err)
			}
			got := dump(t, tdb.bdb)
			if c.checks == 0 {
				sameContent(t, "the task DB after a rebuild cancelled before its merge", got, before)
				return
			}
			if len(got) >= 20_000 {
				t.Fatalf("the merge ran to its end: %d keys", len(got))
			}
			if has, err := tdb.holdsData(); has || err != nil {
				t.Fatalf("holdsData after a cancelled merge = %v, %v; want a DB the next restore rebuilds", has, err)
			}
		})
	}
}
