package changelog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
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

// TestKafkaTailFailsWhenItsDirectoryIsRemoved: a standby's tail whose
// state directory is removed must end with ErrCorrupt once it has records
// to write (its writes would otherwise pile up in memtables Badger can
// never flush), close, and a new tail on the same directory must rebuild
// the whole state from the changelog.
func TestKafkaTailFailsWhenItsDirectoryIsRemoved(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	w := e.start(t.TempDir())
	defer w.stop()
	mustPut(t, w.kv, "k0", "0")
	w.commit()

	dir := filepath.Join(t.TempDir(), "standby")
	sb := e.startTail(dir)
	waitCaughtUp := func(sb *tailNode) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for p, _ := sb.progress(); p.Lag != 0 || p.Offsets == nil; p, _ = sb.progress() {
			if time.Now().After(deadline) {
				t.Fatalf("the tail did not catch up within 30 s: %+v", p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCaughtUp(sb)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k0": "0"}
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; ; i++ {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprint(i)
		mustPut(t, w.kv, k, v)
		w.commit()
		want[k] = v
		select {
		case err := <-sb.done:
			if !IsCorrupt(err) || !strings.Contains(err.Error(), "removed") {
				t.Fatalf("tail ended with %v; want ErrCorrupt saying its directory was removed", err)
			}
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				sb.cancel()
				t.Fatalf("the tail still runs 30 s after its directory was removed")
			}
			continue
		}
		break
	}
	closed := make(chan struct{})
	go func() {
		_ = sb.task.Close()
		_ = sb.db.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the standby's DB did not return within 30 s")
	}

	sb = e.startTail(dir)
	waitCaughtUp(sb)
	if err := sb.stop(); err != nil {
		t.Fatalf("tail: %v", err)
	}
	equalMaps(t, "standby state rebuilt after its directory was removed", contents(t, sb.kv), want)
	_ = sb.task.Close()
	_ = sb.db.Close()
}
