package changelog

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2/z"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/tidemark-streams/tidemark/store"
)

// Damaged local state is handled in three places:
//
//   - OpenDB reads every table the MANIFEST of each task DB names and
//     checks its block checksums (verifyTables) before Badger sees the
//     directory. Badger opens tables in goroutines of its own, where a
//     panic on a damaged table (Badger has several) kills the process and
//     nothing can recover it: every restart would crash the same way. Here
//     a damaged table is ErrCorrupt, and OpenDB moves that task DB aside
//     and starts it empty.
//   - Every read of Badger the stores and tools do runs under recoverRead,
//     which turns a panic raised inside Badger (damage that appeared after
//     the open, or an open with verification off) into an error wrapping
//     ErrCorrupt, with the store and partition it happened on; so is a
//     value Badger could not read from its value log (lostValue).
//     The task DB it happened in is marked (markCorrupt).
//   - The runtime, given such an error, closes the DB and calls Quarantine,
//     which moves the marked task DBs aside as OpenDB does; the next
//     OpenDB starts them empty and their stores rebuild from their
//     changelogs.

// IsCorrupt reports whether err says the local state is damaged: the
// caller should close the DB, Quarantine its directory and open it again,
// so that every store rebuilds from its changelog.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// Quarantine moves damaged state aside, once the DB that found it is
// closed, and returns where it went. When reads marked task DBs as damaged
// (their errors wrap ErrCorrupt), only those move, each to
// <dir>/tasks/<task>.corrupt-<UTC time>, and only those tasks rebuild;
// otherwise the whole directory moves to <dir>.corrupt-<UTC time>, as
// OpenDB does with a directory it cannot open. Nothing is deleted: the
// damaged state stays there for inspection until someone removes it. The
// DB in dir must be closed first (Quarantine fails while a DB has it
// open); a following OpenDB(dir) starts the moved state empty and its
// stores rebuild from their changelogs.
func Quarantine(dir string, log *slog.Logger) (movedTo string, err error) {
	if log == nil {
		log = slog.Default()
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("changelog: quarantine state dir %s: %w", dir, err)
	}
	unlock, err := lockDir(dir, true)
	if err != nil {
		return "", err
	}
	defer unlock()
	ids, err := listTaskDirs(dir)
	if err != nil {
		return "", err
	}
	var moved []string
	for _, id := range ids {
		tdir := filepath.Join(dir, tasksDir, id)
		if !isMarkedCorrupt(tdir) {
			continue
		}
		to, err := moveAside(tdir, fmt.Sprintf("local state of task %s is damaged", id), nil, log)
		if err != nil {
			return strings.Join(moved, ", "), err
		}
		moved = append(moved, to)
	}
	if len(moved) > 0 {
		return strings.Join(moved, ", "), nil
	}
	return moveAside(dir, "local state is damaged", nil, log)
}

// errInUse is wrapped by the errors of a state directory another process
// (or another DB of this one) has open.
var errInUse = errors.New("its directory lock is held")

// moveAside renames dir to <dir>.corrupt-<UTC time> and says so in the
// log; cause is why, for the log line.
func moveAside(dir, why string, cause error, log *slog.Logger) (string, error) {
	aside := fmt.Sprintf("%s.corrupt-%s", strings.TrimRight(dir, string(os.PathSeparator)),
		time.Now().UTC().Format("20060102T150405.000000000"))
	args := []any{"dir", dir, "moved_to", aside}
	if cause != nil {
		args = append(args, "err", cause)
	}
	log.Warn(why+"; moving it aside and rebuilding its stores from their changelogs", args...)
	if err := os.Rename(dir, aside); err != nil {
		if cause != nil {
			return "", fmt.Errorf("changelog: move corrupt state %s aside: %w (%v)", dir, err, cause)
		}
		return "", fmt.Errorf("changelog: move corrupt state %s aside: %w", dir, err)
	}
	return aside, nil
}

// recoverRead is deferred by every function that reads Badger: it turns a
// panic raised inside Badger into an error wrapping ErrCorrupt in *err,
// and logs it with its stack. A function that calls back into the caller
// while it reads (a scan's fn) sets *inFn around the call: a panic there
// is the caller's, not Badger's, and goes on as it was (inFn may be nil
// when there is no callback). closed, when not nil, says whether the DB
// was closed: Badger's iterators panic when the DB closes under them,
// which is a shutdown race and not damage.
//
// It must be called directly by defer (recover only works there).
func recoverRead(log *slog.Logger, closed *atomic.Bool, err *error, inFn *bool) {
	r := recover()
	if r == nil {
		return
	}
	if inFn != nil && *inFn {
		panic(r)
	}
	*err = caughtPanic(log, closed, r)
}

func caughtPanic(log *slog.Logger, closed *atomic.Bool, r any) error {
	if e, ok := r.(error); ok && errors.Is(e, badger.ErrDBClosed) || closed != nil && closed.Load() {
		return fmt.Errorf("changelog: read of a closed DB (%v): %w", r, store.ErrClosed)
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("Badger panicked reading local state; treating the state as corrupt", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return fmt.Errorf("%w: Badger panicked: %v", ErrCorrupt, r)
}

// readErr classifies an error a Badger read returned: a checksum mismatch
// is ErrCorrupt. Badger's reads mostly log such errors and go on (see
// lostValue), but not all of its paths do. It formats the errors it wraps
// with %v, so only the message tells.
func readErr(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) {
		return err
	}
	if strings.Contains(err.Error(), y.ErrChecksumMismatch.Error()) {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return err
}

// lostValue reports a value Badger could not read from its value log.
// Badger logs such a failure (an entry missing or damaged, a CRC mismatch)
// and returns an empty value and no error; but only values of 1 KiB and
// more go to the value log, so an empty one read from there is a lost one.
func lostValue(item *badger.Item, v []byte) error {
	if len(v) > 0 || item.ValueSize() <= 0 {
		return nil
	}
	return fmt.Errorf("%w: the value of key %q could not be read from the value log (Badger logged why)", ErrCorrupt, item.Key())
}

// checkManifest refuses a directory that has tables but no MANIFEST.
// Badger would start a new MANIFEST and delete every table as
// unreferenced, keeping the writes still in its memtable logs: a fragment
// of the state, with the latest applied offsets among them, so a restore
// would replay only the changelog's tail onto it. It costs a directory
// listing, so it runs even when verification is off.
func checkManifest(dir string) error {
	if hasManifest(dir) {
		return nil
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) > 0 {
		return fmt.Errorf("changelog: state dir %s: %w: %d tables but no MANIFEST", dir, ErrCorrupt, len(tables))
	}
	return nil
}

// verifyWorkers is how many tables verifyTables reads at once. The work is
// faulting pages in more than checksumming: with a cold page cache, four
// readers verified 1M keys (119 MB of tables) in ~190 ms where two took
// ~300 ms, for the same CPU (BenchmarkOpenVerify, on a busy 2-core
// machine).
const verifyWorkers = 4

// verifyTables checks, before Badger opens dir, that every table its
// MANIFEST names exists and that every block of it matches its checksum.
// It runs in the caller's goroutine (and its own workers), so a panic
// Badger's table code raises on damaged bytes is recovered here and
// reported as ErrCorrupt. It reads the whole LSM tree once; the pages it
// reads stay in the page cache for Badger's open. It changes nothing in
// dir.
func verifyTables(dir string, bopts badger.Options) (err error) {
	unlock, err := lockDir(dir, false)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("changelog: verify state dir %s: %w: reading the MANIFEST panicked: %v", dir, ErrCorrupt, r)
		}
	}()
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new directory; see checkManifest
	}
	if err != nil {
		return fmt.Errorf("changelog: verify state dir %s: %w", dir, err)
	}
	mf, _, err := badger.ReplayManifestFile(f, bopts.ExternalMagicVersion, bopts)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("changelog: verify state dir %s: %w: MANIFEST: %v", dir, ErrCorrupt, err)
	}
	ids := make([]uint64, 0, len(mf.Tables))
	for id := range mf.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	var (
		mu       sync.Mutex
		errs     []error
		next     int
		namedMax uint64
		wg       sync.WaitGroup
	)
	for range min(verifyWorkers, len(ids)) {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == len(ids) || len(errs) > 0 {
					mu.Unlock()
					return
				}
				id := ids[next]
				next++
				mu.Unlock()
				v, err := verifyTable(table.NewFilename(id, dir), id, mf.Tables[id], bopts.BlockSize)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				namedMax = max(namedMax, v)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("changelog: verify state dir %s: %w", dir, errs[0])
	}
	return checkLostTables(dir, mf.Tables, namedMax)
}

// verifyTable reads one table file through Badger's table code, from a
// read-only mapping of its own, checks every block's checksum, and returns
// the highest version the table holds.
func verifyTable(path string, id uint64, tm badger.TableManifest, blockSize int) (maxVersion uint64, err error) {
	name := filepath.Base(path)
	if tm.KeyID != 0 {
		// Encrypted: tidemark never sets a key, and Badger will refuse
		// the directory itself.
		return 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%w: table %s named by the MANIFEST: %v", ErrCorrupt, name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("table %s: %w", name, err)
	}
	if fi.Size() < 8 {
		return 0, fmt.Errorf("%w: table %s has %d bytes", ErrCorrupt, name, fi.Size())
	}
	data, err := z.Mmap(f, false, fi.Size())
	if err != nil {
		return 0, fmt.Errorf("table %s: map: %w", name, err)
	}
	// Runs after the recover below: nothing reads data once it has.
	defer func() { _ = z.Munmap(data) }()

	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: table %s: reading it panicked: %v", ErrCorrupt, name, r)
		}
	}()
	// OpenInMemoryTable reads the index (checksummed) and the last block;
	// VerifyChecksum reads every block. Neither keeps data past the call.
	t, err := table.OpenInMemoryTable(data, id, &table.Options{
		ChkMode:     options.NoVerification,
		Compression: tm.Compression,
		BlockSize:   blockSize,
	})
	if err != nil {
		return 0, fmt.Errorf("%w: table %s: %v", ErrCorrupt, name, err)
	}
	if err := t.VerifyChecksum(); err != nil {
		return 0, fmt.Errorf("%w: table %s: %v", ErrCorrupt, name, err)
	}
	return t.MaxVersion(), nil
}
