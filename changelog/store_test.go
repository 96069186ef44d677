package changelog

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/storetest"
)

func openTestDB(t testing.TB, opts Options) *DB {
	t.Helper()
	db, err := OpenDB(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testTaskDB returns the task DB of the default task of partition p (the
// one a TaskState without an ID uses), opened and pinned until db closes.
func testTaskDB(t testing.TB, db *DB, p int32) *taskDB {
	t.Helper()
	tdb, err := db.acquire(defaultTaskID(p), true)
	if err != nil {
		t.Fatal(err)
	}
	return tdb
}

// testBDB is the Badger DB of testTaskDB.
func testBDB(t testing.TB, db *DB, p int32) *badger.DB { return testTaskDB(t, db, p).bdb }

// taskDirOf returns the only task directory in the state directory dir,
// or dir itself when it is a task directory.
func taskDirOf(t testing.TB, dir string) string {
	t.Helper()
	if hasManifest(dir) {
		return dir
	}
	ids, err := listTaskDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("%d task directories in %s (%v), want one", len(ids), dir, ids)
	}
	return filepath.Join(dir, tasksDir, ids[0])
}

// applier applies a task's overlay at random points between writes, so
// the conformance suite sees reads merged over every mix of overlay and
// Badger: never applied, always applied, and in between.
type applier struct {
	t     testing.TB
	task  *TaskState
	every int // 0: never; 1: after every write; n: with probability 1/n
	r     *rand.Rand
}

func (a *applier) wrote(err error) error {
	if err != nil || a.every == 0 {
		return err
	}
	if a.every == 1 || a.r.IntN(a.every) == 0 {
		if err := a.task.Apply(nil); err != nil {
			a.t.Fatalf("apply: %v", err)
		}
	}
	return nil
}

type kvApplier struct {
	store.KeyValue
	a *applier
}

func (s kvApplier) Put(k, v []byte) error { return s.a.wrote(s.KeyValue.Put(k, v)) }
func (s kvApplier) Delete(k []byte) error { return s.a.wrote(s.KeyValue.Delete(k)) }

type winApplier struct {
	store.Window
	a *applier
}

func (s winApplier) Put(k []byte, start int64, v []byte) error {
	return s.a.wrote(s.Window.Put(k, start, v))
}
func (s winApplier) ExpireBefore(start int64) error { return s.a.wrote(s.Window.ExpireBefore(start)) }

type sessApplier struct {
	store.Session
	a *applier
}

func (s sessApplier) Put(k []byte, start, end int64, v []byte) error {
	return s.a.wrote(s.Session.Put(k, start, end, v))
}
func (s sessApplier) Remove(k []byte, start, end int64) error {
	return s.a.wrote(s.Session.Remove(k, start, end))
}
func (s sessApplier) ExpireBefore(end int64) error { return s.a.wrote(s.Session.ExpireBefore(end)) }

var applyModes = []struct {
	name  string
	every int
}{
	{"overlay only", 0},
	{"applied after every write", 1},
	{"applied at random points", 7},
}

func openUnlogged(t *testing.T, kind store.Kind, every int, opts Options) (store.Store, *applier) {
	db := openTestDB(t, opts)
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 2})
	s, err := task.Open(store.Spec{Name: "s", Kind: kind, WindowSize: 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return s, &applier{t: t, task: task, every: every, r: rand.New(rand.NewPCG(uint64(every), 1))}
}

func TestBadgerKeyValueConformance(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) {
			storetest.RunKeyValue(t, func(t *testing.T) store.KeyValue {
				s, a := openUnlogged(t, store.KindKeyValue, m.every, Options{})
				return kvApplier{s.(store.KeyValue), a}
			})
		})
	}
}

func TestBadgerWindowConformance(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) {
			storetest.RunWindow(t, func(t *testing.T) store.Window {
				s, a := openUnlogged(t, store.KindWindow, m.every, Options{})
				return winApplier{s.(store.Window), a}
			})
		})
	}
}

func TestBadgerSessionConformance(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) {
			storetest.RunSession(t, func(t *testing.T) store.Session {
				s, a := openUnlogged(t, store.KindSession, m.every, Options{})
				return sessApplier{s.(store.Session), a}
			})
		})
	}
}

// The staged path (overlays too big for one Badger transaction) must give
// the same results; a limit of 3 entries forces it on the suite's data.
func TestBadgerConformanceStagedApply(t *testing.T) {
	opts := Options{applyTxnLimit: 3}
	t.Run("key-value", func(t *testing.T) {
		storetest.RunKeyValue(t, func(t *testing.T) store.KeyValue {
			s, a := openUnlogged(t, store.KindKeyValue, 7, opts)
			return kvApplier{s.(store.KeyValue), a}
		})
	})
	t.Run("window", func(t *testing.T) {
		storetest.RunWindow(t, func(t *testing.T) store.Window {
			s, a := openUnlogged(t, store.KindWindow, 7, opts)
			return winApplier{s.(store.Window), a}
		})
	})
}
