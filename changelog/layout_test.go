package changelog

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// Every task has a Badger DB of its own, in <dir>/tasks/<id>, open while
// its TaskState is; the directory lists, scans and snapshots them all.
func TestEveryTaskHasItsOwnDB(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db, err := OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := db.NewTaskState(TaskStateConfig{ID: "0_1", AppID: "app", Partition: 1})
	b := db.NewTaskState(TaskStateConfig{ID: "1_1", AppID: "app", Partition: 1})
	mustPut(t, openKV(t, a, "counts", false), "x", "1")
	mustPut(t, openKV(t, b, "totals", false), "y", "2")
	for _, task := range []*TaskState{a, b} {
		if err := task.ApplyAt(nil, pos("in", 1, 7)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"0_1", "1_1"} {
		if !hasManifest(filepath.Join(dir, tasksDir, id)) {
			t.Fatalf("no Badger DB in %s", filepath.Join(dir, tasksDir, id))
		}
	}
	if hasManifest(dir) {
		t.Fatal("a Badger DB at the root of the state directory")
	}
	if a.tdb == b.tdb || db.Stats().OpenTaskDBs != 2 {
		t.Fatalf("two tasks, %d open task DBs", db.Stats().OpenTaskDBs)
	}
	snap := openSnapshot(t, db)
	equalMaps(t, "task 0_1 in a snapshot", readSnapshotKV(t, snap, "counts", 1), map[string]string{"x": "1"})
	equalMaps(t, "task 1_1 in a snapshot", readSnapshotKV(t, snap, "totals", 1), map[string]string{"y": "2"})
	snap.Close()

	// Closing a task closes its DB; the other goes on.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().OpenTaskDBs; n != 1 {
		t.Fatalf("%d open task DBs after a task closed, want 1", n)
	}
	mustPut(t, openKV(t, db.NewTaskState(TaskStateConfig{ID: "2_1", AppID: "app", Partition: 1}), "other", false), "z", "3")
	equalMaps(t, "a snapshot without the closed task", readSnapshotKV(t, openSnapshot(t, db), "counts", 1), map[string]string{})

	stores, err := db.Stores()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range stores {
		got = append(got, s.Name+"@"+s.Task)
	}
	if strings.Join(got, " ") != "counts@0_1 other@2_1 totals@1_1" {
		t.Fatalf("stores %v", got)
	}
	var n int
	if err := db.Scan(StoreInstance{Name: "counts", Partition: 1, Kind: store.KindKeyValue}, ScanOptions{}, func(Entry) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("Scan of a closed task's store: %d entries, %v", n, err)
	}
}

// writeFormat1 writes a state directory as versions with one Badger DB
// per process did: the DB at the root, its owner in meta key 'w', one
// key-value store of partition 3 with an applied offset; and the
// runtime's instance id file beside it.
func writeFormat1(t *testing.T, dir string, owner Owner) {
	t.Helper()
	bdb, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	id := storeID(testStoreKV, testPartition)
	err = bdb.Update(func(txn *badger.Txn) error {
		sets := [][2][]byte{
			{metaKey(metaFormat), binary.BigEndian.AppendUint64(nil, formatVersion)},
			{metaKey(metaRegistry, id), encodeRegistry(store.KindKeyValue, TopicName("app", testStoreKV))},
			{append(withNS(nsData, id), "old-key"...), []byte("old value")},
			{offsetKey(TopicName("app", testStoreKV), testPartition), encodeApplied(42, time.Now(), [16]byte{})},
		}
		if owner.Application != "" {
			sets = append(sets, [2][]byte{metaKey(metaOwner), encodeOwner(owner)})
		}
		for _, kv := range sets {
			if err := txn.Set(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "instance-id"), []byte("instance-7"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A state directory of format 1 is read as it is by tools, refused
// untouched by another application, and converted by its own: its owner
// kept, its Badger files deleted (every store rebuilds from its
// changelog), other files left alone.
func TestOpenDBConvertsAFormat1Directory(t *testing.T) {
	orders := Owner{"orders", "topo-1"}
	dir := filepath.Join(t.TempDir(), "state")
	writeFormat1(t, dir, orders)

	ro, err := OpenDB(dir, Options{ReadOnly: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ro.Owner(); !ok || o != orders {
		t.Fatalf("read-only owner of a format-1 directory = %+v, %v", o, ok)
	}
	stores, err := ro.Stores()
	if err != nil || len(stores) != 1 || stores[0].Name != testStoreKV {
		t.Fatalf("read-only stores of a format-1 directory = %v, %v", stores, err)
	}
	var vals []string
	err = ro.Scan(stores[0], ScanOptions{}, func(e Entry) bool { vals = append(vals, string(e.Key)+"="+string(e.Value)); return true })
	if err != nil || strings.Join(vals, ",") != "old-key=old value" {
		t.Fatalf("read-only scan of a format-1 directory = %v, %v", vals, err)
	}
	if a, ok, err := ro.AppliedOffset(TopicPartition{TopicName("app", testStoreKV), testPartition}); err != nil || !ok || a.Offset != 42 {
		t.Fatalf("read-only applied offset = %+v, %v, %v", a, ok, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	before := dirDigest(t, dir)
	if _, err := openOwned(t, dir, Owner{"payments", "topo-1"}, nil); !errors.Is(err, ErrOwnedByOtherApplication) {
		t.Fatalf("OpenDB of another application's format-1 directory = %v", err)
	}
	if dirDigest(t, dir) != before {
		t.Fatal("a refused format-1 directory was changed")
	}

	var log logBuffer
	db, err := openOwned(t, dir, orders, &log)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := db.Owner(); !ok || o != orders {
		t.Fatalf("owner after the conversion = %+v, %v", o, ok)
	}
	if stores, err := db.Stores(); err != nil || len(stores) != 0 {
		t.Fatalf("stores after the conversion = %v, %v; want none (rebuilt from the changelogs)", stores, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "STATE instance-id" {
		t.Fatalf("files after the conversion: %v", names)
	}
	if !strings.Contains(log.String(), "layout of an older version") {
		t.Fatalf("the log does not say why the state is rebuilt:\n%s", log.String())
	}
	task := db.NewTaskState(TaskStateConfig{ID: "0_3", AppID: "app", Partition: testPartition})
	mustPut(t, openKV(t, task, testStoreKV, false), "new", "state")
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	db, err = openOwned(t, dir, orders, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task = db.NewTaskState(TaskStateConfig{ID: "0_3", AppID: "app", Partition: testPartition})
	equalMaps(t, "state written after the conversion", contents(t, openKV(t, task, testStoreKV, false)), map[string]string{"new": "state"})
}

// A read that finds a task DB damaged marks it; Quarantine then moves that
// task's DB aside and no other, and only its stores start empty.
func TestQuarantineMovesOnlyTheDamagedTask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	writeTestState(t, dir, Options{}, 3000) // task p3
	db, err := OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	healthy := db.NewTaskState(TaskStateConfig{ID: "healthy", AppID: "app", Partition: testPartition})
	mustPut(t, openKV(t, healthy, "other", false), "k", "v")
	if err := healthy.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	breakEntries(t, filepath.Join(dir, tasksDir, defaultTaskID(testPartition)))

	db, err = OpenDB(dir, Options{Logger: quietLog, NoVerifyChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	if err := kv.Range(nil, nil, func([]byte, []byte) bool { return true }); !IsCorrupt(err) {
		t.Fatalf("Range over damaged blocks = %v, want ErrCorrupt", err)
	}
	_ = task.Close()
	_ = db.Close()
	var log logBuffer
	moved, err := Quarantine(dir, log.logger())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, tasksDir, defaultTaskID(testPartition)) + ".corrupt-"; !strings.HasPrefix(moved, want) || strings.Contains(moved, ",") {
		t.Fatalf("Quarantine moved %s, want only %s*", moved, want)
	}
	db, err = OpenDB(dir, Options{Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task = db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ = openTestStores(t, task)
	equalMaps(t, "the damaged task after Quarantine", contents(t, kv), map[string]string{})
	healthy = db.NewTaskState(TaskStateConfig{ID: "healthy", AppID: "app", Partition: testPartition})
	equalMaps(t, "the other task after Quarantine", contents(t, openKV(t, healthy, "other", false)), map[string]string{"k": "v"})
}

// OpenDB's check moves a damaged task DB aside and leaves the others.
func TestOpenDBMovesOnlyTheDamagedTaskAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	writeTestState(t, dir, Options{}, 3000)
	db, err := OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	healthy := db.NewTaskState(TaskStateConfig{ID: "healthy", AppID: "app", Partition: testPartition})
	mustPut(t, openKV(t, healthy, "other", false), "k", "v")
	if err := healthy.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	corrupt(t, filepath.Join(dir, tasksDir, defaultTaskID(testPartition)))

	var log logBuffer
	db, err = OpenDB(dir, Options{Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	healthy = db.NewTaskState(TaskStateConfig{ID: "healthy", AppID: "app", Partition: testPartition})
	equalMaps(t, "the undamaged task", contents(t, openKV(t, healthy, "other", false)), map[string]string{"k": "v"})
	aside, _ := filepath.Glob(filepath.Join(dir, tasksDir, "*.corrupt-*"))
	if len(aside) != 1 || !strings.HasPrefix(filepath.Base(aside[0]), defaultTaskID(testPartition)+".") {
		t.Fatalf("moved aside: %v", aside)
	}
}
