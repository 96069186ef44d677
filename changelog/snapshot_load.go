package changelog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// SnapshotLoad is what LoadSnapshot did for a task.
type SnapshotLoad struct {
	// Loaded is set when a snapshot chain was loaded into the task DB;
	// Manifest is then its last snapshot.
	Loaded   bool
	Manifest SnapshotManifest
	// Objects and Bytes count the backups loaded.
	Objects  int
	Bytes    int64
	Duration time.Duration
	// Skipped lists the chains passed over (damaged, partial, of another
	// topology), newest first, with why.
	Skipped []string
	// LocalState is set when the task already had local state: nothing
	// was loaded.
	LocalState bool
}

// LoadSnapshot gives task the newest usable snapshot chain of s as its
// local state, when it has none: when <dir>/tasks/<task> does not exist
// (a new instance, or state moved aside as corrupt) and the task DB is not
// open. The load holds no lock of the DB: other tasks open and close
// meanwhile. Each chain is loaded, full backup then incrementals in order, into
// a new Badger DB next to the task's directory, each object's size and
// checksum checked against its manifest as it is read, and the result
// renamed into place; a chain that fails (an object missing or damaged, a
// gap in its seqs, a manifest of another state layout) is logged and the
// previous chain tried. With no usable chain the task has no local state
// and its restore replays its changelogs from the start, as without
// snapshots. An error is returned only for local failures (the state
// directory cannot be written) and cancellation.
//
// Loads run one at a time. Two at once took longer in total, each about
// twice as long as alone, so the first task to be ready waited for both;
// and their starts together (two Badger DBs opened, two backups decoded)
// stalled other tasks' commits in the process: 10–20 ms with nothing else
// running, and in `bench --failover` (two moved partitions, 1M keys) the
// unmoved partitions' p99 rose to 200–350 ms in that second. One at a
// time: no such rise, and the moved partitions' first output came ~1 s
// sooner.
//
// The loaded DB holds the changelog offsets and the input position of its
// last snapshot, as the task DB that was backed up did: the task's
// changelog restore then replays only the tail past them. progress, when
// set, hears of each object loaded.
func (db *DB) LoadSnapshot(ctx context.Context, s *SnapshotStore, task string, progress func(m SnapshotManifest, loaded, total int)) (res SnapshotLoad, err error) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if !validTaskID(task) {
		return res, fmt.Errorf("changelog: load snapshot: task id %q: want letters, digits, '_' and '-'", task)
	}
	if db.opts.ReadOnly || db.legacy {
		return res, fmt.Errorf("changelog: load snapshot of task %s: %s is read-only", task, db.dir)
	}
	if db.hasTaskState(task) {
		res.LocalState = true
		return res, nil
	}
	select {
	case db.loading <- struct{}{}:
		defer func() { <-db.loading }()
	case <-ctx.Done():
		return res, ctx.Err()
	}
	removeSnapshotTemps(db.dir, task, db.log)
	chains, err := s.chains(ctx, task)
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		s.opts.Logger.Warn("cannot list snapshots; the task restores from its changelogs", "task", task, "err", err)
		res.Skipped = append(res.Skipped, "list: "+err.Error())
		return res, nil
	}
	for _, chain := range slices.Backward(chains) {
		n, bytes, m, lerr := db.loadChain(ctx, s, task, chain, progress)
		if lerr == nil {
			res.Loaded, res.Manifest, res.Objects, res.Bytes = true, m, n, bytes
			return res, nil
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if errors.Is(lerr, errLocalStateAppeared) {
			res.LocalState = true
			return res, nil
		}
		var local *localError
		if errors.As(lerr, &local) {
			return res, lerr
		}
		s.opts.Logger.Warn("snapshot chain unusable; trying the previous one", "task", task, "chain", chain, "err", lerr)
		res.Skipped = append(res.Skipped, chain+": "+lerr.Error())
	}
	if len(res.Skipped) > 0 {
		s.opts.Logger.Warn("no usable snapshot; the task restores from its changelogs", "task", task, "chains_skipped", len(res.Skipped))
	}
	return res, nil
}

// hasTaskState reports whether task has local state: its DB is open or
// its directory exists.
func (db *DB) hasTaskState(task string) bool {
	db.mu.Lock()
	_, open := db.tasks[task]
	db.mu.Unlock()
	_, err := os.Stat(db.taskDir(task))
	return open || err == nil
}

// errLocalStateAppeared: the task got local state while a snapshot
// loaded (a tool opened it); the load is dropped.
var errLocalStateAppeared = errors.New("the task got local state during the load")

// localError is a failure of the local state directory, not of the
// snapshot: trying an older chain would not help.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

const snapshotTempMark = ".snapshot-"

// removeSnapshotTemps deletes the temporary directories of loads a crash
// interrupted.
func removeSnapshotTemps(dir, task string, log interface{ Warn(string, ...any) }) {
	matches, _ := filepath.Glob(filepath.Join(dir, tasksDir, task+snapshotTempMark+"*"))
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			log.Warn("remove an interrupted snapshot load", "dir", m, "err", err)
		}
	}
}

// loadChain loads chain into a temporary DB and renames it to the task's
// directory.
func (db *DB) loadChain(ctx context.Context, s *SnapshotStore, task, chain string, progress func(SnapshotManifest, int, int)) (n int, bytes int64, last SnapshotManifest, err error) {
	ms, err := s.Manifests(ctx, task, chain)
	if err != nil {
		return 0, 0, last, err
	}
	// The complete prefix: seq 0 (a full backup) and each next seq
	// continuing from its predecessor's version. A manifest past a gap is
	// damage; a backup without its manifest is a snapshot still (or never
	// to be) written, and is ignored.
	if len(ms) == 0 {
		return 0, 0, last, errors.New("no complete snapshot in the chain")
	}
	for i, m := range ms {
		switch {
		case m.Format != snapshotFormat || m.KeyFormat != formatVersion:
			return 0, 0, last, fmt.Errorf("snapshot %d has format %d/%d, want %d/%d", m.Seq, m.Format, m.KeyFormat, snapshotFormat, formatVersion)
		case m.Task != task || m.Chain != chain || m.Application != s.app:
			return 0, 0, last, fmt.Errorf("snapshot %d names %s/%s/%s", m.Seq, m.Application, m.Task, m.Chain)
		case m.Seq != i:
			return 0, 0, last, fmt.Errorf("snapshot %d is missing", i)
		case i == 0 && m.Since != 0:
			return 0, 0, last, fmt.Errorf("the chain's first snapshot is incremental (since %d)", m.Since)
		case i > 0 && m.Since > ms[i-1].Until:
			return 0, 0, last, fmt.Errorf("snapshot %d starts at version %d, past its predecessor's %d", m.Seq, m.Since, ms[i-1].Until)
		case db.hasOwner && m.Fingerprint != "" && db.owner.Fingerprint != "" && m.Fingerprint != db.owner.Fingerprint:
			return 0, 0, last, fmt.Errorf("snapshot of another state layout (%s, want %s)", m.Fingerprint, db.owner.Fingerprint)
		}
	}
	tmp := db.taskDir(task) + snapshotTempMark + chain
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return 0, 0, last, &localError{fmt.Errorf("changelog: load snapshot of task %s: %w", task, err)}
	}
	tdb := &taskDB{db: db, id: task, dir: tmp}
	bdb, err := openBadger(badgerOptions(tmp, db.opts, normalMode, 1), db.log)
	if err != nil {
		return 0, 0, last, &localError{fmt.Errorf("changelog: load snapshot of task %s: open %s: %w", task, tmp, err)}
	}
	tdb.bdb = bdb
	rb, err := newRebuild(tdb, db.opts.rebuildRunBytes)
	if err != nil {
		_ = bdb.Close()
		return 0, 0, last, &localError{err}
	}
	defer rb.cancel()
	for i, m := range ms {
		nb, lerr := s.loadObject(ctx, rb, m)
		if lerr != nil {
			_ = bdb.Close()
			return 0, 0, last, lerr
		}
		bytes += nb
		n++
		if progress != nil {
			progress(m, i+1, len(ms))
		}
	}
	if err := rb.finish(ctx, newPacer(s.opts.Pace)); err != nil {
		_ = bdb.Close()
		if ctx.Err() != nil {
			return 0, 0, last, ctx.Err()
		}
		return 0, 0, last, &localError{fmt.Errorf("changelog: load snapshot of task %s: %w", task, err)}
	}
	last = ms[len(ms)-1]
	// Finish a staged Apply the backup caught between its steps, as a
	// reopen after a crash would, then check the offsets against the
	// manifest's.
	if err := tdb.finishApplies(); err != nil {
		_ = bdb.Close()
		return 0, 0, last, fmt.Errorf("finish a staged apply in the loaded snapshot: %w", err)
	}
	for _, o := range last.Offsets {
		a, found, err := tdb.appliedOffset(TopicPartition{o.Topic, o.Partition})
		if err != nil || !found || a.Offset != o.Offset {
			_ = bdb.Close()
			return 0, 0, last, fmt.Errorf("loaded state has offset %d (found %t, err %v) for %s/%d, manifest %d", a.Offset, found, err, o.Topic, o.Partition, o.Offset)
		}
	}
	if err := bdb.Close(); err != nil {
		return 0, 0, last, &localError{fmt.Errorf("changelog: load snapshot of task %s: close %s: %w", task, tmp, err)}
	}
	// Into place under openMu, so that no open of the task DB races the
	// rename; the load itself holds no lock.
	db.openMu.Lock()
	defer db.openMu.Unlock()
	if db.hasTaskState(task) {
		return 0, 0, last, errLocalStateAppeared
	}
	if err := os.Rename(tmp, db.taskDir(task)); err != nil {
		return 0, 0, last, &localError{fmt.Errorf("changelog: load snapshot of task %s: %w", task, err)}
	}
	return n, bytes, last, nil
}

// loadObject reads one backup into the rebuild of the load's DB, checking
// its size and checksum as it goes (a mismatch is found at the end, with
// the backup already read: the caller discards the rebuild).
func (s *SnapshotStore) loadObject(ctx context.Context, rb *rebuild, m SnapshotManifest) (n int64, err error) {
	key := s.objectKey(m.Task, m.Chain, m.Seq, "backup")
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", key, err)
	}
	defer r.Close()
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(r, h)}
	var in io.Reader = cr
	if s.opts.Pace != nil {
		in = &pacedReader{ctx: ctx, r: cr, p: newPacer(s.opts.Pace)}
	}
	if err := readBackup(in, rb); err != nil {
		if ctx.Err() != nil {
			return cr.n, ctx.Err()
		}
		return cr.n, fmt.Errorf("load %s: %w", key, err)
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return cr.n, fmt.Errorf("read %s: %w", key, err)
	}
	if cr.n != m.Bytes {
		return cr.n, fmt.Errorf("%s has %d bytes, manifest says %d", key, cr.n, m.Bytes)
	}
	if sum := "sha256:" + hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, m.Checksum) {
		return cr.n, fmt.Errorf("%s has checksum %s, manifest says %s", key, sum, m.Checksum)
	}
	return cr.n, nil
}

// A snapshot loads like a rebuild (rebuild.go): Badger's Load would
// write every key through the memtables and level 0 and compact them, on
// the DB's own goroutines, which a paced reader does not slow down. A
// trace of a failover with two 500k-key loads had Badger's write
// goroutine on ~0.9 of a core for ~0.3 s per load, beside compactions.

// maxBackupFrame bounds one frame of a backup: Badger's stream sends
// batches of a few MB; anything far larger is damage.
const maxBackupFrame = 1 << 30

// readBackup reads a Badger backup (frames of a little-endian uint64 size
// and a KVList) into rb. A backup lists each key's versions newest first,
// the newest a delete marker if the key was deleted; only the newest
// counts, and a later backup of the chain overrides an earlier one.
func readBackup(r io.Reader, rb *rebuild) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf, last []byte
	list := &pb.KVList{}
	now := uint64(time.Now().Unix())
	for {
		var sz uint64
		if err := binary.Read(br, binary.LittleEndian, &sz); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("backup frame size: %w", noEOF(err))
		}
		if sz > maxBackupFrame {
			return fmt.Errorf("backup frame of %d bytes", sz)
		}
		buf = slices.Grow(buf[:0], int(sz))[:sz]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("backup frame: %w", noEOF(err))
		}
		list.Reset()
		if err := proto.Unmarshal(buf, list); err != nil {
			return fmt.Errorf("backup frame: %w", err)
		}
		for _, kv := range list.Kv {
			if kv.StreamDone || (last != nil && bytes.Equal(kv.Key, last)) {
				continue // an older version
			}
			last = append(last[:0], kv.Key...)
			deleted := len(kv.Meta) > 0 && kv.Meta[0]&badgerBitDelete != 0
			if deleted || (kv.ExpiresAt != 0 && kv.ExpiresAt <= now) {
				if err := rb.Delete(kv.Key); err != nil {
					return err
				}
				continue
			}
			if err := rb.Set(kv.Key, kv.Value); err != nil {
				return err
			}
		}
	}
}

// badgerBitDelete is Badger's meta bit of a delete marker (value.go's
// bitDelete), as its backups carry it.
const badgerBitDelete = 1 << 0

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
