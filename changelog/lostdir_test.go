package changelog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAStateDirRemovedWhileOpen: the state directory is removed under an
// open DB. The next Apply that looks must fail with ErrCorrupt, naming the
// removal; Close must still return (Badger's flush of the memtable would
// otherwise retry forever); and the next OpenDB must start the task empty,
// with what Close left moved aside.
func TestAStateDirRemovedWhileOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	var log logBuffer
	db, err := OpenDB(dir, Options{Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	tp := TopicPartition{TopicName("app", testStoreKV), testPartition}
	put := func(from int) {
		for i := from; i < from+100; i++ {
			if err := kv.Put(fmt.Appendf(nil, "key-%05d", i), []byte("value")); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0)
	if err := task.Apply(ChangelogOffsets{tp: 100}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	put(100)
	task.tdb.dirCheck.Store(0) // as if dirCheckEvery had passed
	err = task.Apply(ChangelogOffsets{tp: 200})
	if !IsCorrupt(err) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("Apply after the state directory was removed: %v; want ErrCorrupt saying it was removed", err)
	}

	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close of a DB whose directory was removed did not return within 30 s")
	}
	if !strings.Contains(log.String(), "directory of an open task DB was removed") {
		t.Errorf("log does not say the directory was removed:\n%s", log.String())
	}

	var reopenLog logBuffer
	db, err = OpenDB(dir, Options{Logger: reopenLog.logger()})
	if err != nil {
		t.Fatalf("OpenDB after the removal: %v", err)
	}
	defer db.Close()
	requireRebuilt(t, dir, db, &reopenLog)
}
