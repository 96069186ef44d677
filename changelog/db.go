package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// DB is the local state of a process (or of an application, when a
// process hosts several): a state directory with one Badger DB per task,
// opened while the task's TaskState uses it. It is safe for concurrent use
// by the tasks; each TaskState is used from its own goroutine.
type DB struct {
	dir    string
	opts   Options
	log    *slog.Logger
	unlock func() // the state directory's lock

	epoch atomic.Uint64 // staged-apply epochs; see apply.go

	// written counts bytes written since the last Checkpoint, for its cost
	// estimate.
	written atomic.Int64
	applies atomic.Int64
	staged  atomic.Int64
	// clients counts the Kafka clients restores and tails created.
	clients atomic.Int64
	// taskOpens counts Badger opens of task DBs (DBStats.TaskDBOpens).
	taskOpens atomic.Int64

	owner    Owner // as recorded; see Owner
	hasOwner bool
	// legacy: a read-only view of a state directory in the layout of
	// format 1, one Badger DB at its root (task DB "").
	legacy bool

	openMu sync.Mutex // serializes opening and closing task DBs
	// loading is held by the one snapshot load that runs at a time; see
	// LoadSnapshot.
	loading chan struct{}
	mu      sync.Mutex
	tasks   map[string]*taskDB // the open task DBs
	// knownTasks is how many task DBs the directory held at OpenDB: the
	// tasks a restarted process will likely open, which share the caches
	// (badgerOptions): a DB opened first gets no cache it must give back.
	knownTasks int

	closed    atomic.Bool // set when Close begins; see recoverRead
	closeOnce sync.Once
	closeErr  error
}

// ErrCorrupt is wrapped by the errors of damaged local state: OpenDB's
// (and TaskState.Open's) when the state cannot be opened and
// Options.KeepCorrupt is set, and a read's when Badger panicked, found a
// checksum mismatch or lost a value (see IsCorrupt and Quarantine).
var ErrCorrupt = errors.New("changelog: local state is corrupt")

// OpenDB opens (or creates) the state directory dir. It opens no Badger DB
// itself: a task's DB opens with the first store its TaskState opens.
//
// Before Badger sees a task DB, OpenDB checks every table's checksums
// (unless opts.NoVerifyChecksums) and, when opts.Owner names an
// application, that the directory is not another application's: that is
// ErrOwnedByOtherApplication, and nothing in dir is changed. A task DB
// that is damaged (a table fails its checksums or is missing, the MANIFEST
// is unreadable or gone, a read marked it) is moved aside to
// <dir>/tasks/<task>.corrupt-<UTC time> unless opts.KeepCorrupt: that
// task's stores then rebuild from their changelogs, which is always
// correct, merely slower. A directory whose own record is unreadable is
// moved aside whole, to <dir>.corrupt-<UTC time>.
//
// A directory in the layout of format 1 (one Badger DB for every task, at
// its root) is converted: its owner is checked and kept, its Badger files
// are deleted, and every store rebuilds from its changelog. Read-only, it
// is read as it is.
func OpenDB(dir string, opts Options) (*DB, error) {
	if opts.RestoreModeMinOffsets < 0 {
		return nil, fmt.Errorf("changelog: open %s: RestoreModeMinOffsets %d is negative", dir, opts.RestoreModeMinOffsets)
	}
	opts.ensureDefaults()
	db, err := openDB(dir, opts)
	if err == nil || opts.KeepCorrupt || opts.ReadOnly || !errors.Is(err, ErrCorrupt) {
		return db, err
	}
	if _, err := moveAside(dir, "local state is unreadable", err, opts.Logger); err != nil {
		return nil, err
	}
	return openDB(dir, opts)
}

func openDB(dir string, opts Options) (*DB, error) {
	db := &DB{dir: dir, opts: opts, log: opts.Logger, tasks: map[string]*taskDB{}, loading: make(chan struct{}, 1)}
	db.epoch.Store(uint64(time.Now().UnixNano()))
	var err error
	if opts.ReadOnly {
		err = db.openReadOnly()
	} else {
		err = db.openReadWrite()
	}
	if err != nil {
		db.closed.Store(true)
		for _, tdb := range db.tasks {
			_ = tdb.close()
		}
		if db.unlock != nil {
			db.unlock()
		}
		return nil, err
	}
	return db, nil
}

func (db *DB) openReadWrite() error {
	dir, opts := db.dir, db.opts
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("changelog: create state dir %s: %w", dir, err)
	}
	// An older version's DB at the root: its owner is read before this
	// process locks the directory (Badger locks it the same way). Files
	// Badger keeps are only taken for one when a MANIFEST or key registry
	// says so, or when a STATE file says the directory is tidemark's (the
	// leftovers of a conversion a crash interrupted).
	var legacyOwner Owner
	rec, found, err := readStateFile(dir)
	if err != nil {
		return err
	}
	legacy := hasLegacyFiles(dir) && (found || hasManifest(dir) || hasKeyRegistry(dir))
	if !found {
		if err := checkManifest(dir); err != nil {
			return err // tables without a MANIFEST
		}
	}
	if legacy && !found {
		if legacyOwner, _, err = readLegacyOwner(dir, opts); err != nil {
			return err
		}
	}
	unlock, err := lockDir(dir, true)
	if err != nil {
		return err
	}
	db.unlock = unlock
	if !found {
		rec = stateRecord{Format: layoutFormat, Application: legacyOwner.Application, Fingerprint: legacyOwner.Fingerprint}
	}
	if rec.Format != layoutFormat {
		return fmt.Errorf("changelog: state dir %s has layout format %d, want %d: %w", dir, rec.Format, layoutFormat, ErrCorrupt)
	}
	have := rec.owner()
	want, wipe, err := db.claim(have, have.Application != "")
	if err != nil {
		return err
	}
	rec.Application, rec.Fingerprint = want.Application, want.Fingerprint
	if wipe {
		// The stores' names may mean other things now: every task
		// rebuilds. The record is written last, so a crash here wipes
		// again at the next open.
		if err := os.RemoveAll(filepath.Join(dir, tasksDir)); err != nil {
			return fmt.Errorf("changelog: wipe %s after a topology change: %w", dir, err)
		}
	}
	if !found || want != have {
		if err := writeStateFile(dir, rec); err != nil {
			return err
		}
	}
	db.owner, db.hasOwner = want, want.Application != ""
	if legacy {
		// After the record: a crash part-way leaves a record and some
		// old files, which the next open deletes.
		db.log.Warn("the state directory has the layout of an older version (one Badger DB for every task); "+
			"deleting it: every store rebuilds from its changelog", "dir", dir)
		if err := removeLegacyFiles(dir); err != nil {
			return err
		}
	}
	return db.checkTaskDirs()
}

func (db *DB) openReadOnly() error {
	dir := db.dir
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("changelog: open state dir %s: %w", dir, err)
	}
	rec, found, err := readStateFile(dir)
	if err != nil {
		return err
	}
	if !found && !hasManifest(dir) {
		return fmt.Errorf("changelog: %s is not a state directory (no %s file, no Badger MANIFEST)", dir, stateFileName)
	}
	unlock, err := lockDir(dir, false)
	if err != nil {
		return err
	}
	db.unlock = unlock
	if found {
		db.owner, db.hasOwner = rec.owner(), rec.Application != ""
		return db.checkTaskDirs()
	}
	// The layout of format 1: one DB at the root, read as task "".
	db.legacy = true
	unlock() // Badger takes the same lock on the root
	db.unlock = nil
	if !db.opts.NoVerifyChecksums {
		if err := verifyTables(dir, badgerOptions(dir, db.opts, normalMode, 1)); err != nil {
			return err
		}
	}
	tdb := &taskDB{db: db, dir: dir, pinned: true}
	if err := tdb.open(normalMode, 1); err != nil {
		return err
	}
	db.tasks[""] = tdb
	o, found, err := readOwner(tdb.bdb, db.log)
	if err != nil {
		return fmt.Errorf("changelog: read owner of %s: %w", dir, err)
	}
	db.owner, db.hasOwner = o, found
	return nil
}

// checkTaskDirs verifies every task DB before Badger opens it, and moves a
// damaged one aside (or fails, with KeepCorrupt or ReadOnly).
func (db *DB) checkTaskDirs() error {
	ids, err := listTaskDirs(db.dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		tdir := db.taskDir(id)
		var damage error
		if isMarkedCorrupt(tdir) && !db.opts.ReadOnly {
			cause, _ := os.ReadFile(filepath.Join(tdir, corruptMarker))
			damage = fmt.Errorf("changelog: task DB %s: %w: a read found it damaged: %s", tdir, ErrCorrupt, strings.TrimSpace(string(cause)))
		} else if err := checkManifest(tdir); err != nil {
			damage = err
		} else if !db.opts.NoVerifyChecksums {
			start := time.Now()
			damage = verifyTables(tdir, badgerOptions(tdir, db.opts, normalMode, 1))
			if damage == nil {
				db.log.Debug("verified the checksums of a task DB", "dir", tdir, "duration", time.Since(start))
			}
		}
		if damage == nil {
			continue
		}
		if !IsCorrupt(damage) || db.opts.KeepCorrupt || db.opts.ReadOnly {
			return damage
		}
		if _, err := moveAside(tdir, fmt.Sprintf("local state of task %s is damaged", id), damage, db.log); err != nil {
			return err
		}
	}
	db.knownTasks = len(ids)
	return nil
}

// openBadger opens Badger; a panic it raises in this goroutine (replaying
// a damaged log, say) is ErrCorrupt. Panics in the goroutines Badger
// starts cannot be recovered; verifyTables runs first so that damaged
// tables never reach them.
func openBadger(bopts badger.Options, log *slog.Logger) (bdb *badger.DB, err error) {
	defer recoverRead(log, nil, &err, nil)
	return badger.Open(bopts)
}

func hasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, badger.ManifestFilename))
	return err == nil
}

func isLockErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot acquire directory lock") || strings.Contains(s, "resource temporarily unavailable")
}

// checkFormat stamps a new task DB with the format version of its keys
// and rejects one of another version as corrupt, which rebuilds the task.
func (tdb *taskDB) checkFormat() (err error) {
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	key := metaKey(metaFormat)
	var found bool
	var version uint64
	err = tdb.bdb.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return it.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("format key of %d bytes", len(v))
			}
			version = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("changelog: read format of %s: %w: %v", tdb.dir, ErrCorrupt, err)
	}
	if found {
		if version != formatVersion {
			return fmt.Errorf("changelog: task DB %s has format %d, want %d: %w", tdb.dir, version, formatVersion, ErrCorrupt)
		}
		return nil
	}
	if tdb.db.opts.ReadOnly {
		return nil
	}
	return tdb.bdb.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey(metaFormat), binary.BigEndian.AppendUint64(nil, formatVersion))
	})
}

// Dir returns the state directory.
func (db *DB) Dir() string { return db.dir }

// Close closes every task DB and the state directory. TaskStates and
// Snapshots must be closed first; reads through one left open fail with
// store.ErrClosed.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.openMu.Lock()
		defer db.openMu.Unlock()
		db.mu.Lock()
		db.closed.Store(true)
		tdbs := make([]*taskDB, 0, len(db.tasks))
		for _, tdb := range db.tasks {
			tdbs = append(tdbs, tdb)
		}
		db.tasks = map[string]*taskDB{}
		db.mu.Unlock()
		var errs []error
		for _, tdb := range tdbs {
			if err := tdb.close(); err != nil {
				errs = append(errs, err)
			}
		}
		if db.unlock != nil {
			db.unlock()
		}
		if len(errs) > 0 {
			db.closeErr = fmt.Errorf("changelog: close %s: %w", db.dir, errors.Join(errs...))
		}
	})
	return db.closeErr
}

// DBStats are a DB's counters, for metrics.
type DBStats struct {
	// Applies counts successful Applies; StagedApplies those that took
	// the staged path because the overlay did not fit one Badger
	// transaction (about 15% of a memtable: raise MemoryBudget if this
	// grows with the commit interval).
	Applies, StagedApplies int64
	// UncheckpointedBytes were written since the last Checkpoint.
	UncheckpointedBytes int64
	// OpenTaskDBs is how many task DBs are open.
	OpenTaskDBs int
	// KafkaClients counts the Kafka clients restores and tails created
	// since the DB opened: two per restore that reads something (one to
	// plan, one to fetch), one per restore that has nothing to read, one
	// per tail (tail.go). A count that climbs while nothing restores is
	// client churn.
	KafkaClients int64
	// TaskDBOpens counts Badger opens of task DBs, reopens included: one
	// per task that starts here, none for a standby that becomes the
	// task's active on this instance (HandOver).
	TaskDBOpens int64
}

// Stats returns the DB's counters.
func (db *DB) Stats() DBStats {
	db.mu.Lock()
	n := len(db.tasks)
	db.mu.Unlock()
	return DBStats{Applies: db.applies.Load(), StagedApplies: db.staged.Load(), UncheckpointedBytes: db.written.Load(), OpenTaskDBs: n,
		KafkaClients: db.clients.Load(), TaskDBOpens: db.taskOpens.Load()}
}
