package changelog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A task DB's directory can disappear while the DB is open: an operator's
// rm -rf of the state directory, a cleaner of /tmp. Badger goes on reading
// through the files it has open, but can never again write a table there,
// and it retries the flush of a full memtable forever: its writes stall
// once the memtables fill, and its Close, which flushes them, never
// returns. So Apply (and a standby's tail) checks the directory (dirLost)
// and fails with an error wrapping ErrCorrupt, which the runtime answers
// as it answers a damaged table: it closes the DB, moves it aside and
// rebuilds the task's stores from their changelogs. A Close of a DB whose
// directory is gone makes the directory again first (recreateLostDir), so
// that Badger's last flush has somewhere to go.

// dirCheckEvery spaces an open task DB's checks of its directory: a stat
// per Apply would cost more than the rare case is worth.
const dirCheckEvery = time.Second

// noteDir records the directory of a task DB Badger just opened.
func (tdb *taskDB) noteDir() {
	if st, err := os.Stat(tdb.dir); err == nil {
		tdb.dirInfo.Store(&st)
	}
	tdb.dirCheck.Store(time.Now().UnixNano())
}

// dirLost returns an error wrapping ErrCorrupt when tdb's directory was
// removed or replaced since Badger opened it; at most once per
// dirCheckEvery it looks.
func (tdb *taskDB) dirLost() error {
	if tdb.dirInfo.Load() == nil || tdb.db.opts.ReadOnly {
		return nil
	}
	now, last := time.Now().UnixNano(), tdb.dirCheck.Load()
	if now-last < int64(dirCheckEvery) || !tdb.dirCheck.CompareAndSwap(last, now) {
		return nil
	}
	return tdb.checkDir()
}

// checkDir is dirLost without the spacing: for a write that failed (Badger
// cannot make a new memtable log in a removed directory), to say why.
func (tdb *taskDB) checkDir() error {
	opened := tdb.dirInfo.Load()
	if opened == nil || tdb.db.opts.ReadOnly {
		return nil
	}
	st, err := os.Stat(tdb.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("changelog: task DB %s: %w: its directory was removed while the DB was open", tdb.dir, ErrCorrupt)
	case err == nil && !os.SameFile(st, *opened):
		return fmt.Errorf("changelog: task DB %s: %w: its directory was replaced while the DB was open", tdb.dir, ErrCorrupt)
	}
	return nil
}

// recreateLostDir makes the directory of a task DB that was removed while
// open again before Badger's Close, with the corrupt marker in it: the
// tables Close flushes there are not a DB (its MANIFEST went with the old
// directory), and the marker has the next Quarantine or OpenDB move them
// aside.
func (tdb *taskDB) recreateLostDir() {
	if tdb.dirInfo.Load() == nil || tdb.db.opts.ReadOnly {
		return
	}
	if _, err := os.Stat(tdb.dir); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	tdb.db.log.Warn("the directory of an open task DB was removed; making it again so that the DB can close, and rebuilding the task's stores from their changelogs",
		"task", tdb.id, "dir", tdb.dir)
	if err := os.MkdirAll(tdb.dir, 0o755); err != nil {
		tdb.db.log.Warn("cannot make the removed directory of a task DB again; closing it may hang", "task", tdb.id, "err", err)
		return
	}
	tdb.marked.Store(true)
	msg := fmt.Sprintf("%s\nits directory was removed while the DB was open\n", time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(tdb.dir, corruptMarker), []byte(msg), 0o644); err != nil {
		tdb.db.log.Warn("cannot mark a task DB whose directory was removed", "task", tdb.id, "err", err)
	}
}
