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

	badger "github.com/tidemark-streams/tidemark/third_party/badger"
)

// DB is the one Badger database of a process. Every task's stores live in
// it under their own key prefixes. It is safe for concurrent use by the
// tasks; each TaskState is used from its own goroutine.
type DB struct {
	bdb  *badger.DB
	dir  string
	opts Options
	log  *slog.Logger

	epoch atomic.Uint64 // staged-apply epochs; see apply.go

	// written counts bytes written since the last Checkpoint, for its cost
	// estimate.
	written atomic.Int64
	applies atomic.Int64
	staged  atomic.Int64

	owner    Owner // as recorded; see Owner
	hasOwner bool

	bulkMu    sync.Mutex
	bulkLoads int // restores running; see bulk.go

	closed    atomic.Bool // set when Close begins; see recoverRead
	closeOnce sync.Once
	closeErr  error
}

// ErrCorrupt is wrapped by the errors of damaged local state: OpenDB's
// when the directory cannot be opened and Options.KeepCorrupt is set, and
// a read's when Badger panicked, found a checksum mismatch or lost a value
// (see IsCorrupt and Quarantine).
var ErrCorrupt = errors.New("changelog: local state is corrupt")

// OpenDB opens (or creates) the Badger DB of a process in dir and finishes
// any Apply a crash interrupted.
//
// Before Badger sees the directory, OpenDB checks every table's checksums
// (unless opts.NoVerifyChecksums) and, when opts.Owner names an
// application, that the directory is not another application's: that is
// ErrOwnedByOtherApplication, and nothing in dir is changed. A directory
// that is damaged (a table fails its checksums or is missing, the MANIFEST
// is unreadable or gone), or of another format version, is moved aside to
// <dir>.corrupt-<UTC time> and replaced by an empty DB unless
// opts.KeepCorrupt: every store then rebuilds from its changelog, which is
// always correct, merely slower.
func OpenDB(dir string, opts Options) (*DB, error) {
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

func openDB(dir string, opts Options) (db *DB, err error) {
	if opts.ReadOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("changelog: open state dir %s: %w", dir, err)
		}
		if !hasManifest(dir) {
			return nil, fmt.Errorf("changelog: %s is not a state directory (no Badger MANIFEST)", dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("changelog: create state dir %s: %w", dir, err)
	}
	if err := checkManifest(dir); err != nil {
		return nil, err
	}
	bopts := badgerOptions(dir, opts)
	if !opts.NoVerifyChecksums {
		start := time.Now()
		if err := verifyTables(dir, bopts); err != nil {
			return nil, err
		}
		opts.Logger.Debug("verified the checksums of local state", "dir", dir, "duration", time.Since(start))
	}
	if !opts.ReadOnly {
		if err := probeOwner(dir, opts); err != nil {
			return nil, err
		}
	}
	bdb, err := openBadger(bopts, opts.Logger)
	if err != nil {
		if isLockErr(err) {
			return nil, fmt.Errorf("changelog: open state dir %s: in use by another process: %w", dir, err)
		}
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("changelog: open state dir %s: %w", dir, err)
	}
	db = &DB{bdb: bdb, dir: dir, opts: opts, log: opts.Logger}
	db.epoch.Store(uint64(time.Now().UnixNano()))
	if err := db.checkFormat(); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if err := db.checkOwner(); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if !opts.ReadOnly {
		if err := db.finishApplies(); err != nil {
			_ = bdb.Close()
			return nil, fmt.Errorf("changelog: finish interrupted apply in %s: %w", dir, err)
		}
	}
	return db, nil
}

// openBadger opens Badger; a panic it raises in this goroutine (replaying
// a damaged log, say) is ErrCorrupt. Panics in the goroutines Badger
// starts cannot be recovered; verifyTables runs first so that damaged
// tables never reach them.
func openBadger(bopts badger.Options, log *slog.Logger) (bdb *badger.DB, err error) {
	defer recoverRead(log, nil, &err, nil)
	return badger.Open(bopts)
}

// finishApplies is recoverStaged (staged.go) with Badger's panics turned
// into ErrCorrupt.
func (db *DB) finishApplies() (err error) {
	defer recoverRead(db.log, &db.closed, &err, nil)
	return readErr(db.recoverStaged())
}

func hasManifest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, badger.ManifestFilename))
	return err == nil
}

func isLockErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot acquire directory lock") || strings.Contains(s, "resource temporarily unavailable")
}

// checkFormat stamps a new DB with the format version and rejects a DB of
// another version as corrupt, which triggers a rebuild.
func (db *DB) checkFormat() (err error) {
	defer recoverRead(db.log, &db.closed, &err, nil)
	key := metaKey(metaFormat)
	var found bool
	var version uint64
	err = db.bdb.View(func(txn *badger.Txn) error {
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
		return fmt.Errorf("changelog: read format of %s: %w: %v", db.dir, ErrCorrupt, err)
	}
	if found {
		if version != formatVersion {
			return fmt.Errorf("changelog: state dir %s has format %d, want %d: %w", db.dir, version, formatVersion, ErrCorrupt)
		}
		return nil
	}
	if db.opts.ReadOnly {
		return nil
	}
	return db.stampFormat()
}

func (db *DB) stampFormat() error {
	return db.bdb.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey(metaFormat), binary.BigEndian.AppendUint64(nil, formatVersion))
	})
}

// Dir returns the directory the DB lives in.
func (db *DB) Dir() string { return db.dir }

// Close closes the DB. Tasks must be closed first.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		if err := db.bdb.Close(); err != nil {
			db.closeErr = fmt.Errorf("changelog: close %s: %w", db.dir, err)
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
}

// Stats returns the DB's counters.
func (db *DB) Stats() DBStats {
	return DBStats{Applies: db.applies.Load(), StagedApplies: db.staged.Load(), UncheckpointedBytes: db.written.Load()}
}
