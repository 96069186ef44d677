package changelog

import (
	"fmt"
	"testing"
	"time"
)

// TestBulkLoadDefersLevelZeroCompaction checks the restore mode of bulk.go
// on small triggers: while a restore (here two overlapping ones) runs,
// flushed memtables stay in level 0; once the last ends, level 0 is
// compacted again. Without the bulk mode the same writes compact.
func TestBulkLoadDefersLevelZeroCompaction(t *testing.T) {
	opts := Options{Logger: quietLog, MemoryBudget: 16 << 20, levelZeroTables: 2, restoreLevelZeroTables: 8}
	n := 0
	// write fills about k memtables (4 MiB each) and waits for their flush.
	write := func(db *DB, k int) {
		t.Helper()
		want := levelTables(db)[0] + k
		for range k {
			wb := db.bdb.NewWriteBatch()
			for range 30_000 { // ~4.4 MB of keys and values
				if err := wb.Set(fmt.Appendf(nil, "d-key-%08d", n*7919%1_000_003), make([]byte, 120)); err != nil {
					t.Fatal(err)
				}
				n++
			}
			if err := wb.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, fmt.Sprintf("%d tables in level 0 or below", want), func() bool {
			l := levelTables(db)
			return l[0]+l[1] >= want
		})
	}

	t.Run("without", func(t *testing.T) {
		db := openTestDB(t, opts)
		write(db, 4)
		waitFor(t, "a level-0 compaction", func() bool { return levelTables(db)[1] > 0 })
	})
	t.Run("with", func(t *testing.T) {
		db := openTestDB(t, opts)
		db.beginBulkLoad()
		db.beginBulkLoad()
		write(db, 3)
		db.endBulkLoad() // one restore still runs
		write(db, 2)
		time.Sleep(200 * time.Millisecond) // compactors look every 50ms
		if l := levelTables(db); l[1] > 0 || l[0] < 5 {
			t.Fatalf("level 0 compacted during a restore: %d tables in level 0, %d below", l[0], l[1])
		}
		db.endBulkLoad()
		waitFor(t, "the level-0 compaction after the restore", func() bool { return levelTables(db)[1] > 0 })
	})
}

// levelTables counts the DB's tables in level 0 ([0]) and below ([1]).
func levelTables(db *DB) [2]int {
	var c [2]int
	for _, ti := range db.bdb.Tables() {
		c[min(ti.Level, 1)]++
	}
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
