package changelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// taskDB is the Badger DB of one task, in <dir>/tasks/<id>. The task's
// stores share it, so that Apply writes all of them and their offsets in
// one Badger transaction.
//
// A taskDB is open while a TaskState uses it (users), while a DB-level
// call (tools, DB.Restore) has pinned it, or while a snapshot or a
// checkpoint reads it (readers). The task's own goroutine uses bdb without
// a lock: only that goroutine replaces it (reopen, in a restore), and only
// while no reader holds it (exclusive); other goroutines read bdb under
// db.mu when they take a reader reference.
type taskDB struct {
	db  *DB
	id  string // "" for the root DB of a directory in the old layout
	dir string

	bdb    *badger.DB
	mode   dbMode
	closed atomic.Bool // closed for good: a read of it is store.ErrClosed, not damage
	marked atomic.Bool // found damaged; see markCorrupt

	// The directory Badger opened, and when Apply last checked it is still
	// there (lostdir.go).
	dirInfo  atomic.Pointer[os.FileInfo]
	dirCheck atomic.Int64

	// Guarded by db.mu.
	users     int
	pinned    bool
	readers   int
	exclusive bool // a restore is reopening it or writes it in restore mode
	handover  bool // one of users is a hand-over (handover.go)
	idleClose bool // close once the last reader is done
	opens     int  // Badger opens, for tests
	restores  int  // restore-mode opens, for tests
	rebuilds  int  // sorted rebuilds (rebuild.go), for tests

	snap *snapState // the snapshot chain being written; see snapshot.go
}

// tasksDir is the directory of the task DBs inside a state directory.
const tasksDir = "tasks"

func (db *DB) taskDir(id string) string {
	if id == "" {
		return db.dir
	}
	return filepath.Join(db.dir, tasksDir, id)
}

// validTaskID reports whether id can name a task directory: letters,
// digits, '_' and '-' (Kafka Streams' "<sub-topology>_<partition>").
func validTaskID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// defaultTaskID is the task DB of a TaskState without an ID, and of a
// store that DB.Restore or Register find in no task DB: one per partition.
func defaultTaskID(partition int32) string { return fmt.Sprintf("p%d", partition) }

// listTaskDirs returns the ids of the task directories under dir, sorted.
// Directories moved aside (<id>.corrupt-<time>) are not task directories.
func listTaskDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, tasksDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: list task directories of %s: %w", dir, err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validTaskID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// acquire returns the open task DB id, opening it if needed, with one more
// user (pin: pinned until the DB closes instead).
func (db *DB) acquire(id string, pin bool) (*taskDB, error) {
	db.openMu.Lock()
	defer db.openMu.Unlock()
	db.mu.Lock()
	if db.closed.Load() {
		db.mu.Unlock()
		return nil, store.ErrClosed
	}
	if id == "" && !db.legacy {
		db.mu.Unlock()
		return nil, errors.New("changelog: a task DB needs an id")
	}
	if tdb := db.tasks[id]; tdb != nil {
		defer db.mu.Unlock()
		if tdb.exclusive {
			return nil, fmt.Errorf("changelog: task DB %s is being restored by another user", id)
		}
		switch {
		case pin:
			tdb.pinned = true
		case tdb.handover:
			tdb.handover = false // the hand-over's user is this one now
		default:
			tdb.users++
		}
		tdb.idleClose = false
		return tdb, nil
	}
	shares := max(len(db.tasks)+1, db.knownTasks)
	db.mu.Unlock()

	if db.legacy {
		return nil, fmt.Errorf("changelog: %s holds state in the layout of an older version: read-only, one DB for every task", db.dir)
	}
	tdb := &taskDB{db: db, id: id, dir: db.taskDir(id)}
	err := tdb.open(normalMode, shares)
	if err != nil && IsCorrupt(err) && !db.opts.KeepCorrupt && !db.opts.ReadOnly {
		// Badger could not open what OpenDB's check passed: a damaged
		// memtable log or value log, say. Only this task rebuilds.
		if _, merr := moveAside(tdb.dir, fmt.Sprintf("local state of task %s is unreadable", id), err, db.log); merr != nil {
			return nil, merr
		}
		err = tdb.open(normalMode, shares)
	}
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	db.tasks[id] = tdb
	if pin {
		tdb.pinned = true
	} else {
		tdb.users = 1
	}
	db.mu.Unlock()
	db.shareCaches()
	return tdb, nil
}

// release drops a user of tdb (a TaskState closed); the last one closes it
// once no reader holds it.
func (db *DB) release(tdb *taskDB) {
	db.openMu.Lock()
	defer db.openMu.Unlock()
	db.mu.Lock()
	tdb.users--
	if tdb.users > 0 || tdb.pinned || db.closed.Load() {
		db.mu.Unlock()
		return
	}
	if tdb.readers > 0 {
		tdb.idleClose = true
		db.mu.Unlock()
		return
	}
	delete(db.tasks, tdb.id)
	db.mu.Unlock()
	tdb.close()
	db.shareCaches()
}

// readers returns the open task DBs that may be read now (not being
// restored), each with one more reader; done releases them.
func (db *DB) readers() (tdbs []*taskDB, done func(), err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return nil, nil, store.ErrClosed
	}
	for _, tdb := range db.tasks {
		if !tdb.exclusive && tdb.bdb != nil {
			tdb.readers++
			tdbs = append(tdbs, tdb)
		}
	}
	slices.SortFunc(tdbs, func(a, b *taskDB) int {
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	return tdbs, func() { db.doneReading(tdbs) }, nil
}

func (db *DB) doneReading(tdbs []*taskDB) {
	var idle []*taskDB
	db.mu.Lock()
	for _, tdb := range tdbs {
		tdb.readers--
		if tdb.readers == 0 && tdb.idleClose && tdb.users == 0 && !tdb.pinned {
			tdb.idleClose = false
			idle = append(idle, tdb)
		}
	}
	db.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	db.openMu.Lock()
	defer db.openMu.Unlock()
	for _, tdb := range idle {
		db.mu.Lock()
		last := db.tasks[tdb.id] == tdb && tdb.users == 0 && !tdb.pinned && tdb.readers == 0
		if last {
			delete(db.tasks, tdb.id)
		}
		db.mu.Unlock()
		if last && !db.closed.Load() {
			tdb.close()
		}
	}
	db.shareCaches()
}

// shareCaches divides the index cache of the memory budget among the
// open task DBs.
func (db *DB) shareCaches() {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := len(db.tasks)
	for _, tdb := range db.tasks {
		if tdb.exclusive || tdb.bdb == nil {
			continue // a reopen sizes it
		}
		_, _ = tdb.bdb.CacheMaxCost(badger.IndexCache, cacheShare(db.opts.MemoryBudget/8, n))
	}
}

// pinAll opens every task DB of the directory for a DB-level call (tools,
// DB.Restore); they stay open until the DB closes.
func (db *DB) pinAll() ([]*taskDB, error) {
	if db.legacy {
		db.mu.Lock()
		defer db.mu.Unlock()
		return []*taskDB{db.tasks[""]}, nil
	}
	ids, err := listTaskDirs(db.dir)
	if err != nil {
		return nil, err
	}
	var out []*taskDB
	for _, id := range ids {
		tdb, err := db.acquire(id, true)
		if err != nil {
			return nil, err
		}
		out = append(out, tdb)
	}
	return out, nil
}

// open opens the task's Badger DB in mode and finishes any Apply a crash
// interrupted. OpenDB verified the tables of every task directory that
// existed before Badger sees it; a task directory made since was written
// by this process.
func (tdb *taskDB) open(mode dbMode, shares int) error {
	db := tdb.db
	if db.opts.ReadOnly {
		if !hasManifest(tdb.dir) {
			return fmt.Errorf("changelog: %s is not a task DB (no Badger MANIFEST)", tdb.dir)
		}
	} else if err := os.MkdirAll(tdb.dir, 0o755); err != nil {
		return fmt.Errorf("changelog: create task DB %s: %w", tdb.dir, err)
	}
	if err := checkManifest(tdb.dir); err != nil {
		return err
	}
	bdb, err := openBadger(badgerOptions(tdb.dir, db.opts, mode, shares), db.log)
	if err != nil {
		if isLockErr(err) {
			return fmt.Errorf("changelog: open task DB %s: in use by another process: %w", tdb.dir, err)
		}
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return fmt.Errorf("changelog: open task DB %s: %w", tdb.dir, err)
	}
	tdb.bdb, tdb.mode = bdb, mode
	tdb.noteDir()
	tdb.opens++
	db.taskOpens.Add(1)
	if mode == restoreMode {
		tdb.restores++
	}
	if err := tdb.checkFormat(); err != nil {
		_ = bdb.Close()
		tdb.bdb = nil
		return err
	}
	if !db.opts.ReadOnly {
		if err := tdb.finishApplies(); err != nil {
			_ = bdb.Close()
			tdb.bdb = nil
			return fmt.Errorf("changelog: finish interrupted apply in %s: %w", tdb.dir, err)
		}
	}
	return nil
}

// close closes the Badger DB for good.
func (tdb *taskDB) close() error {
	tdb.closed.Store(true)
	if tdb.bdb == nil {
		return nil
	}
	tdb.dropSnapshotPin()
	tdb.recreateLostDir()
	if err := tdb.bdb.Close(); err != nil {
		tdb.db.log.Warn("close task DB", "task", tdb.id, "err", err)
		return fmt.Errorf("changelog: close task DB %s: %w", tdb.dir, err)
	}
	return nil
}

// reopen closes the Badger DB and opens it again in mode, for the task
// goroutine that holds tdb as its only user. It fails at once (errShared)
// when tdb has other users, and waits up to readerWait for snapshots and
// checkpoints reading it to finish (errBusy after that); from then until it
// is back in normal mode, no new reader takes it. The block and index
// caches start cold.
func (tdb *taskDB) reopen(mode dbMode) error {
	db := tdb.db
	db.mu.Lock()
	if mode != normalMode {
		if tdb.users+btoi(tdb.pinned) != 1 {
			db.mu.Unlock()
			return errShared
		}
		tdb.exclusive = true
		deadline := time.Now().Add(readerWait)
		for tdb.readers > 0 {
			if time.Now().After(deadline) {
				tdb.exclusive = false
				db.mu.Unlock()
				return errBusy
			}
			db.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			db.mu.Lock()
		}
	}
	shares := max(len(db.tasks), db.knownTasks)
	old := tdb.bdb
	tdb.bdb = nil
	db.mu.Unlock()

	var err error
	if old != nil {
		tdb.dropSnapshotPin()
		if cerr := old.Close(); cerr != nil {
			db.log.Warn("close task DB to reopen it", "task", tdb.id, "err", cerr)
		}
	}
	// Keep the value of tdb.bdb the task goroutine sees consistent with
	// tdb.mode: open writes both.
	nt := &taskDB{db: db, id: tdb.id, dir: tdb.dir}
	err = nt.open(mode, shares)
	db.mu.Lock()
	tdb.bdb, tdb.mode = nt.bdb, mode
	tdb.opens++
	if mode == restoreMode {
		tdb.restores++
	}
	if mode == normalMode || err != nil {
		tdb.exclusive = false
	}
	db.mu.Unlock()
	if err != nil {
		tdb.closed.Store(true)
		return err
	}
	return nil
}

var (
	errShared = errors.New("other users hold the task DB")
	errBusy   = errors.New("snapshots kept reading the task DB")
)

// readerWait bounds how long a restore waits for the snapshots reading its
// task DB before it restores in normal mode instead.
const readerWait = 5 * time.Second

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// corruptMarker is the file markCorrupt leaves in a damaged task DB.
const corruptMarker = "TIDEMARK-CORRUPT"

// markCorrupt records in the task's directory that a read found it
// damaged, so that Quarantine, or the next OpenDB, moves only this task's
// state aside. Read-only opens leave directories as they are.
func (tdb *taskDB) markCorrupt(cause error) {
	if tdb == nil || tdb.id == "" || tdb.db.opts.ReadOnly || !tdb.marked.CompareAndSwap(false, true) {
		return
	}
	msg := fmt.Sprintf("%s\n%v\n", time.Now().UTC().Format(time.RFC3339), cause)
	if err := os.WriteFile(filepath.Join(tdb.dir, corruptMarker), []byte(msg), 0o644); errors.Is(err, os.ErrNotExist) {
		// Its directory was removed: recreateLostDir marks it as it closes.
	} else if err != nil {
		tdb.db.log.Warn("cannot mark a damaged task DB; Quarantine will move the whole state directory aside", "task", tdb.id, "err", err)
	}
}

// noteErr marks tdb damaged when err says so, and returns err.
func (tdb *taskDB) noteErr(err error) error {
	if err != nil && IsCorrupt(err) {
		tdb.markCorrupt(err)
	}
	return err
}

func isMarkedCorrupt(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, corruptMarker))
	return err == nil
}

// finishApplies is recoverStaged (staged.go) with Badger's panics turned
// into ErrCorrupt.
func (tdb *taskDB) finishApplies() (err error) {
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	return readErr(tdb.recoverStaged())
}

// readTs is the timestamp a read of the DB would see now: every commit so
// far.
func (tdb *taskDB) readTs() uint64 {
	txn := tdb.bdb.NewTransaction(false)
	defer txn.Discard()
	return txn.ReadTs()
}
