package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// ErrNotFlushed is returned by Apply when the overlay holds writes of
// logged stores that Flush never produced: they are in no changelog, so
// Badger would hold state Kafka cannot restore.
var ErrNotFlushed = errors.New("changelog: Apply of logged writes that were not flushed")

// errTooBig switches Apply to the staged path.
var errTooBig = errors.New("overlay too big for one transaction")

// emitFunc writes one key: a put of value, or a delete.
type emitFunc func(key, value []byte, del bool) error

// Apply writes the overlay to Badger atomically together with offsets, the
// changelog positions the transaction just committed (from Flush), and
// applies pending expiry. Call it only after the transaction committed; on
// error the task must be restored before it processes again (its overlay is
// kept, so a retry is possible). The stores' recorded input position stays
// as it was; see ApplyAt.
func (t *TaskState) Apply(offsets ChangelogOffsets) error { return t.ApplyAt(offsets, nil) }

// ApplyAt is Apply that also records pos, the input position the committed
// state reflects (the task's input offsets the transaction committed), as
// the position of every store of the task, in the same atomic step as the
// data and the offsets: what a Snapshot reports with the data. A nil pos
// leaves the recorded position as it was.
func (t *TaskState) ApplyAt(offsets ChangelogOffsets, pos InputPosition) error {
	if t.closed {
		return store.ErrClosed
	}
	if pos == nil {
		pos = t.stagedPos
	}
	if !t.flushed && t.sealed == nil && t.hasLogged() {
		return fmt.Errorf("changelog: apply partition %d: %w", t.cfg.Partition, ErrNotFlushed)
	}
	if t.tdb == nil {
		if len(offsets) == 0 && t.applied().Len() == 0 {
			// A task without stores (stateless) has nothing to apply, and
			// no DB.
			t.flushed = false
			if t.sealed != nil {
				t.unseal()
			}
			t.db.applies.Add(1)
			return nil
		}
		if err := t.openDB(); err != nil {
			return fmt.Errorf("changelog: apply partition %d: %w", t.cfg.Partition, err)
		}
	}
	if err := t.tdb.dirLost(); err != nil {
		return fmt.Errorf("changelog: apply partition %d: %w", t.cfg.Partition, t.tdb.noteErr(err))
	}
	now := time.Now()
	var bytes int64
	meta := func(emit emitFunc) error {
		for tp, off := range offsets {
			if err := emit(offsetKey(tp.Topic, tp.Partition), encodeApplied(off, now, t.topicID(tp.Topic)), false); err != nil {
				return err
			}
		}
		for _, st := range t.stores {
			if cut := t.applyCut(st); cut > st.cut {
				if err := emit(metaKey(metaCut, st.id), putTime(nil, cut), false); err != nil {
					return err
				}
			}
		}
		if pos != nil {
			return t.emitPosition(pos, emit)
		}
		return nil
	}
	readTs, wrote, err := t.applyInTxn(meta, &bytes)
	staged := errors.Is(err, errTooBig) || errors.Is(err, badger.ErrTxnTooBig)
	var stagedFrom, stagedTo uint64
	if staged {
		bytes = 0
		t.db.staged.Add(1)
		stagedFrom = t.tdb.readTs()
		err = t.applyStaged(meta, &bytes)
		stagedTo = t.tdb.readTs()
	}
	if err != nil {
		t.cache.clear()
		if lost := t.tdb.checkDir(); lost != nil {
			err = fmt.Errorf("%w (%v)", lost, err)
		}
		return fmt.Errorf("changelog: apply partition %d: %w", t.cfg.Partition, t.tdb.noteErr(err))
	}
	if staged {
		t.followApply(stagedFrom, stagedTo)
	} else {
		to := readTs
		if wrote {
			to++ // the commit's timestamp
		}
		t.followApply(readTs, to)
	}
	t.db.applies.Add(1)
	t.db.written.Add(bytes)
	for _, st := range t.stores {
		st.cut = t.applyCut(st)
	}
	if t.sealed != nil {
		t.unseal()
	} else {
		t.clearPending()
	}
	if t.stagedPos != nil {
		t.sentPos, t.stagedPos = t.stagedPos, nil
	}
	t.flushed = false
	t.dropSnapshot() // the cache followed the write (followApply)
	return nil
}

// topicID is the id Restore learned for a changelog topic of the task.
func (t *TaskState) topicID(topic string) [16]byte {
	for _, st := range t.stores {
		if st.topic == topic {
			return st.topicID
		}
	}
	return [16]byte{}
}

func (t *TaskState) hasLogged() bool {
	found := false
	t.pending.Ascend(func(e *entry) bool { found = e.st.spec.Logged; return !found })
	return found
}

// applyInTxn is the common case: one Badger transaction holds the overlay,
// the expiry deletes and the offsets.
// It returns the transaction's read timestamp and whether it wrote
// anything (a commit without writes takes no timestamp): the read cache
// follows Badger by them.
func (t *TaskState) applyInTxn(meta func(emitFunc) error, bytes *int64) (uint64, bool, error) {
	limit := t.db.opts.applyTxnLimit
	if limit > 0 && t.applied().Len() > limit {
		return 0, false, errTooBig
	}
	txn := t.tdb.bdb.NewTransaction(true)
	defer txn.Discard()
	n := 0
	emit := func(key, value []byte, del bool) error {
		n++
		if limit > 0 && n > limit {
			return errTooBig
		}
		*bytes += int64(len(key) + len(value))
		if del {
			return txn.Delete(key)
		}
		return txn.Set(key, value)
	}
	if err := t.dataOps(emit); err != nil {
		return 0, false, err
	}
	if err := meta(emit); err != nil {
		return 0, false, err
	}
	return txn.ReadTs(), n > 0, txn.Commit()
}

// applyStaged handles an overlay too big for one transaction: stage, mark
// (the commit point, with the offsets), copy into place, clean up. Each
// step is idempotent, and OpenDB redoes the last two for a marked epoch.
func (t *TaskState) applyStaged(meta func(emitFunc) error, bytes *int64) error {
	db, tdb := t.db, t.tdb
	epoch := db.epoch.Add(1)
	wb := tdb.bdb.NewWriteBatch()
	defer wb.Cancel()
	var seq uint64
	var ops []stagedOp // kept to copy into place without reading the staging back
	err := t.dataOps(func(key, value []byte, del bool) error {
		seq++
		*bytes += int64(len(key) + len(value))
		ops = append(ops, stagedOp{key, value, del})
		return wb.Set(stagedKey(epoch, seq), encodeStaged(key, value, del))
	})
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := db.hook("staged"); err != nil {
		return err
	}
	err = tdb.bdb.Update(func(txn *badger.Txn) error {
		if err := meta(func(key, value []byte, del bool) error { return txn.Set(key, value) }); err != nil {
			return err
		}
		return txn.Set(metaKey(metaApplied, binary.BigEndian.AppendUint64(nil, epoch)), nil)
	})
	if err != nil {
		return fmt.Errorf("mark epoch %d: %w", epoch, err)
	}
	if err := db.hook("marked"); err != nil {
		return err
	}
	return tdb.copyStaged(epoch, ops)
}

type stagedOp struct {
	key, value []byte
	del        bool
}

// copyStaged is finishStaged for the Apply that staged ops: it writes them
// from memory and deletes the staging by key, instead of reading it back.
func (tdb *taskDB) copyStaged(epoch uint64, ops []stagedOp) error {
	db := tdb.db
	wb := tdb.bdb.NewWriteBatch()
	defer wb.Cancel()
	for _, op := range ops {
		var err error
		if op.del {
			err = wb.Delete(op.key)
		} else {
			err = wb.Set(op.key, op.value)
		}
		if err != nil {
			return fmt.Errorf("copy staged epoch %d: %w", epoch, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("copy staged epoch %d: %w", epoch, err)
	}
	if err := db.hook("copied"); err != nil {
		return err
	}
	drop := tdb.bdb.NewWriteBatch()
	defer drop.Cancel()
	for seq := uint64(1); seq <= uint64(len(ops)); seq++ {
		if err := drop.Delete(stagedKey(epoch, seq)); err != nil {
			return fmt.Errorf("drop staged epoch %d: %w", epoch, err)
		}
	}
	if err := drop.Flush(); err != nil {
		return fmt.Errorf("drop staged epoch %d: %w", epoch, err)
	}
	return tdb.bdb.Update(func(txn *badger.Txn) error {
		return txn.Delete(metaKey(metaApplied, binary.BigEndian.AppendUint64(nil, epoch)))
	})
}

func (db *DB) hook(step string) error {
	if db.opts.applyHook == nil {
		return nil
	}
	return db.opts.applyHook(step)
}

// dataOps emits the overlay's writes, their time-index entries, and the
// deletes of windows and sessions below a raised expiry cut.
func (t *TaskState) dataOps(emit emitFunc) error {
	var err error
	t.applied().Ascend(func(e *entry) bool {
		st := e.st
		if st.spec.Kind == store.KindKeyValue {
			err = emit(e.key, e.value, e.del)
			return err == nil
		}
		suffix := e.key[len(st.dprefix):]
		var tm int64
		if tm, err = suffixTime(st.spec.Kind, suffix); err != nil {
			return false
		}
		if tm < t.applyCut(st) {
			return true // the expiry below deletes whatever Badger holds
		}
		if err = emit(e.key, e.value, e.del); err != nil {
			return false
		}
		err = emit(indexKey(st.id, tm, suffix), nil, e.del)
		return err == nil
	})
	if err != nil {
		return err
	}
	for _, st := range t.stores {
		if t.applyCut(st) <= st.cut {
			continue
		}
		if err := t.expire(st, emit); err != nil {
			return fmt.Errorf("expire store %q before %d: %w", st.spec.Name, t.applyCut(st), err)
		}
	}
	return nil
}

// expire emits deletes for st's Badger entries whose indexed time is
// between its applied cut and its new one. Keys are collected first: emit
// may write to a transaction that must not be iterated while it is written.
//
// The iteration starts at the applied cut, not at the start of the index:
// everything below it was deleted when that cut was applied (in the same
// Badger transaction that stored it; restores and writes skip times below
// it), and Badger keeps those deletes as tombstones until compaction. Seeking
// from the start stepped over every one of them on every commit: a third of
// the CPU of a windowed count at 5 commits/s (bench sweep profile), and more
// the more often the application commits.
func (t *TaskState) expire(st *storeState, emit emitFunc) error {
	ip := withNS(nsIndex, st.id)
	lo := putTime(append([]byte(nil), ip...), st.cut)
	hi := putTime(append([]byte(nil), ip...), t.applyCut(st))
	it := t.snapshot().NewIterator(badger.IteratorOptions{Prefix: ip}) // a TaskState with stores has a DB
	defer it.Close()
	for it.Seek(lo); it.Valid(); it.Next() {
		ik := it.Item().Key()
		if string(ik) >= string(hi) {
			break
		}
		ik = it.Item().KeyCopy(nil)
		suffix := ik[len(ip)+8:]
		if err := emit(append(append([]byte(nil), st.dprefix...), suffix...), nil, true); err != nil {
			return err
		}
		if err := emit(ik, nil, true); err != nil {
			return err
		}
	}
	return nil
}

func indexKey(id []byte, tm int64, suffix []byte) []byte {
	k := make([]byte, 0, 1+len(id)+8+len(suffix))
	k = append(append(k, nsIndex), id...)
	k = putTime(k, tm)
	return append(k, suffix...)
}
