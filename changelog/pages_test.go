package changelog

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// TestReleaseTablePages pages out the tables and checks that
// every key still reads back (the pages come back from the file) and that,
// on Linux, the process's file-backed RSS went down.
func TestReleaseTablePages(t *testing.T) {
	db := openTestDB(t, Options{Logger: quietLog, MemoryBudget: 16 << 20})
	tdb := testTaskDB(t, db, 0)
	bdb := tdb.bdb
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 50) }
	// Write until memtables have been flushed to a few tables, as a
	// restore of more than a few memtables does.
	n := 0
	deadline := time.Now().Add(time.Minute)
	for len(bdb.Tables()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 4 tables after %d keys", n)
		}
		wb := bdb.NewWriteBatch()
		for range 20_000 {
			if err := wb.Set(fmt.Appendf(nil, "d-key-%08d", n), value(n)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := wb.Flush(); err != nil {
			t.Fatal(err)
		}
		if n >= 400_000 {
			time.Sleep(50 * time.Millisecond) // let the flushes catch up
		}
	}
	before := rssFile(t)
	releaseTablePages([]string{tdb.dir})
	after := rssFile(t)
	if runtime.GOOS == "linux" {
		t.Logf("RssFile %d kB -> %d kB", before>>10, after>>10)
		if after >= before {
			t.Errorf("RssFile did not go down: %d kB -> %d kB", before>>10, after>>10)
		}
	}
	releaseTablePages([]string{tdb.dir}) // advising released pages again is harmless
	err := bdb.View(func(txn *badger.Txn) error {
		for i := range n {
			it, err := txn.Get(fmt.Appendf(nil, "d-key-%08d", i))
			if err != nil {
				return fmt.Errorf("key %d: %w", i, err)
			}
			v, err := it.ValueCopy(nil)
			if err != nil {
				return err
			}
			if !bytes.Equal(v, value(i)) {
				return fmt.Errorf("key %d: wrong value after release", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func rssFile(*testing.T) int64 {
	v, _ := procStatusBytes("RssFile")
	return v
}
