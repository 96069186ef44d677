package changelog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// TestRestoreModeDefersLevelZeroCompaction checks the restore mode of
// restoremode.go on small triggers: while a task DB is in restore mode,
// flushed memtables stay in level 0; once it leaves, level 0 is compacted
// again. In normal mode the same writes compact.
func TestRestoreModeDefersLevelZeroCompaction(t *testing.T) {
	opts := Options{Logger: quietLog, MemoryBudget: 16 << 20, levelZeroTables: 2, restoreLevelZeroTables: 8}
	n := 0
	// write fills about k memtables (4 MiB each) and waits for their flush.
	write := func(tdb *taskDB, k int) {
		t.Helper()
		want := levelTables(tdb)[0] + k
		for range k {
			wb := tdb.bdb.NewWriteBatch()
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
			l := levelTables(tdb)
			return l[0]+l[1] >= want
		})
	}

	t.Run("normal mode", func(t *testing.T) {
		tdb := testTaskDB(t, openTestDB(t, opts), 0)
		write(tdb, 4)
		waitFor(t, "a level-0 compaction", func() bool { return levelTables(tdb)[1] > 0 })
	})
	t.Run("restore mode", func(t *testing.T) {
		tdb := testTaskDB(t, openTestDB(t, opts), 0)
		if ok, err := tdb.enterRestoreMode(); !ok || err != nil {
			t.Fatalf("enterRestoreMode = %v, %v", ok, err)
		}
		write(tdb, 5)
		time.Sleep(200 * time.Millisecond) // compactors look every 50ms
		if l := levelTables(tdb); l[1] > 0 || l[0] < 5 {
			t.Fatalf("level 0 compacted in restore mode: %d tables in level 0, %d below", l[0], l[1])
		}
		if err := tdb.leaveRestoreMode(); err != nil {
			t.Fatal(err)
		}
		if tdb.mode != normalMode || tdb.exclusive {
			t.Fatalf("after leaving restore mode: mode %d, exclusive %v", tdb.mode, tdb.exclusive)
		}
		waitFor(t, "the level-0 compaction after the restore", func() bool { return levelTables(tdb)[1] > 0 })
	})
	t.Run("a shared task DB stays in normal mode", func(t *testing.T) {
		db := openTestDB(t, opts)
		a := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0})
		b := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0}) // the same default id
		openKV(t, a, "x", false)
		openKV(t, b, "y", false)
		if a.tdb != b.tdb {
			t.Fatal("two task states with one id have two DBs")
		}
		if ok, err := a.tdb.enterRestoreMode(); ok || err != nil {
			t.Fatalf("enterRestoreMode of a shared task DB = %v, %v; want false, nil", ok, err)
		}
	})
}

// TestRestoreModeWaitsForSnapshotReaders checks that a reopen waits for a
// snapshot reading the task DB, and that snapshots taken meanwhile leave
// the task DB out instead of reading one being reopened.
func TestRestoreModeWaitsForSnapshotReaders(t *testing.T) {
	db := openTestDB(t, Options{Logger: quietLog})
	task := db.NewTaskState(TaskStateConfig{ID: "0_0", AppID: "app", Partition: 0})
	kv := openKV(t, task, "kv", false)
	mustPut(t, kv, "a", "1")
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	snap := openSnapshot(t, db)
	entered := make(chan bool)
	go func() {
		ok, err := task.tdb.enterRestoreMode()
		if err != nil {
			t.Error(err)
		}
		entered <- ok
	}()
	waitFor(t, "restore waiting for readers", func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return task.tdb.exclusive
	})
	during := openSnapshot(t, db)
	equalMaps(t, "a snapshot taken while the task DB is reopened", readSnapshotKV(t, during, "kv", 0), map[string]string{})
	during.Close()
	select {
	case <-entered:
		t.Fatal("the task DB was reopened under an open snapshot")
	case <-time.After(100 * time.Millisecond):
	}
	equalMaps(t, "the snapshot the reopen waits for", readSnapshotKV(t, snap, "kv", 0), map[string]string{"a": "1"})
	snap.Close()
	if !<-entered {
		t.Fatal("no restore mode after the snapshot closed")
	}
	if err := task.tdb.leaveRestoreMode(); err != nil {
		t.Fatal(err)
	}
	equalMaps(t, "after the reopen", readSnapshotKV(t, openSnapshot(t, db), "kv", 0), map[string]string{"a": "1"})
}

// TestKafkaRestoreWritesInRestoreMode restores a changelog of several
// memtables from the real broker with small triggers: level 0 must hold
// every table the restore flushed, none compacted, when the last record is
// written (restoreHook); afterwards the task DB is back in normal mode and
// compacts level 0. It fails if a restore does not enter restore mode.
func TestKafkaRestoreWritesInRestoreMode(t *testing.T) {
	spec := store.Spec{Name: "kv", Kind: store.KindKeyValue, Logged: true}
	e := newKafkaEnv(t, spec, 1)
	topic := e.topic
	const keys = 60_000 // 500-byte values: ~30 MB, seven memtables of 4 MiB
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(5, 6))
	for range keys {
		v := make([]byte, 500)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf([]byte{tagKeyValue}, "key-%010d", r.IntN(1<<30)), Value: v}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var hooked int
	opts := Options{Logger: quietLog, MemoryBudget: 16 << 20, levelZeroTables: 2, restoreLevelZeroTables: 30,
		RestoreModeMinOffsets: 1000, noRebuild: true, restoreHook: func(tdb *taskDB) {
			hooked++
			waitFor(t, "the restore's memtables in level 0", func() bool { return levelTables(tdb)[0] >= 5 })
			time.Sleep(300 * time.Millisecond) // compactors look every 50ms
			if l := levelTables(tdb); l[1] > 0 {
				t.Errorf("level 0 was compacted during the restore: %d tables in level 0, %d below", l[0], l[1])
			}
		}}
	db := openTestDB(t, opts)
	task := db.NewTaskState(TaskStateConfig{ID: "0_0", AppID: e.app, Partition: 0, Producer: cl})
	if _, err := task.Open(spec, 0); err != nil {
		t.Fatal(err)
	}
	res, err := task.Restore(ctx, e.restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != keys {
		t.Fatalf("restored %d records, want %d", res.Records, keys)
	}
	if hooked != 1 || task.tdb.restores != 1 {
		t.Fatalf("restore hook called %d times, %d restore-mode opens; want one of each", hooked, task.tdb.restores)
	}
	if task.tdb.mode != normalMode || task.tdb.exclusive {
		t.Fatalf("after the restore: mode %d, exclusive %v; want normal mode", task.tdb.mode, task.tdb.exclusive)
	}
	waitFor(t, "the level-0 compaction after the restore", func() bool { return levelTables(task.tdb)[1] > 0 })
	if a, ok, err := task.tdb.appliedOffset(TopicPartition{topic, 0}); err != nil || !ok || a.Offset != keys {
		t.Fatalf("applied offset %+v, %v, %v; want %d", a, ok, err, keys)
	}
}

// levelTables counts the task DB's tables in level 0 ([0]) and below ([1]).
func levelTables(tdb *taskDB) [2]int {
	var c [2]int
	for _, ti := range tdb.bdb.Tables() {
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

// TestOpenDBRefusesANegativeRestoreModeMin: a negative threshold is a
// mistake, not "always": OpenDB says so instead of sorting every restore.
func TestOpenDBRefusesANegativeRestoreModeMin(t *testing.T) {
	_, err := OpenDB(t.TempDir(), Options{Logger: quietLog, RestoreModeMinOffsets: -1})
	if err == nil || !strings.Contains(err.Error(), "RestoreModeMinOffsets -1 is negative") {
		t.Fatalf("OpenDB with RestoreModeMinOffsets -1: err %v, want it refused", err)
	}
	if got := (Options{RestoreModeMinOffsets: 1000}).restoreModeMin(); got != 1000 {
		t.Fatalf("restoreModeMin with 1000 set: %d", got)
	}
	if got := (Options{}).restoreModeMin(); got != restoreModeMinOffsets {
		t.Fatalf("restoreModeMin by default: %d, want %d", got, restoreModeMinOffsets)
	}
}
