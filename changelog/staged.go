package changelog

import (
	"bytes"
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Staged entries of a large Apply live under 's' epoch seq until the
// epoch's marker is written; see the package doc.

func stagedKey(epoch, seq uint64) []byte {
	k := []byte{nsStaged}
	k = binary.BigEndian.AppendUint64(k, epoch)
	return binary.BigEndian.AppendUint64(k, seq)
}

func stagedPrefix(epoch uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{nsStaged}, epoch)
}

func encodeStaged(key, value []byte, del bool) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen32+len(key)+len(value))
	if del {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, value...)
}

func decodeStaged(b []byte) (key, value []byte, del bool, err error) {
	if len(b) < 2 || b[0] > 1 {
		return nil, nil, false, errBadKey
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)-1-w) < n {
		return nil, nil, false, errBadKey
	}
	key = b[1+w : 1+w+int(n)]
	return key, b[1+w+int(n):], b[0] == 1, nil
}

// finishStaged copies a marked epoch's staged entries into place, then
// deletes them, then the marker. Redoing it after a crash at any point
// gives the same result.
func (tdb *taskDB) finishStaged(epoch uint64) error {
	prefix := stagedPrefix(epoch)
	wb := tdb.bdb.NewWriteBatch()
	defer wb.Cancel()
	err := tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			key, value, del, err := decodeStaged(v)
			if err != nil {
				return fmt.Errorf("staged entry %x: %w", it.Item().Key(), err)
			}
			if del {
				err = wb.Delete(key)
			} else {
				err = wb.Set(key, value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return fmt.Errorf("copy staged epoch %d: %w", epoch, err)
	}
	if err := tdb.db.hook("copied"); err != nil {
		return err
	}
	if err := tdb.dropPrefix(prefix); err != nil {
		return fmt.Errorf("drop staged epoch %d: %w", epoch, err)
	}
	return tdb.bdb.Update(func(txn *badger.Txn) error {
		return txn.Delete(metaKey(metaApplied, binary.BigEndian.AppendUint64(nil, epoch)))
	})
}

// dropPrefix deletes every key with prefix, in batches. (Badger's own
// DropPrefix stops all writes of the DB while it runs.)
func (tdb *taskDB) dropPrefix(prefix []byte) error {
	wb := tdb.bdb.NewWriteBatch()
	defer wb.Cancel()
	err := tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wb.Flush()
}

// recoverStaged finishes every marked epoch and drops staging that was
// never marked: those Applies did not happen, and their offsets were not
// recorded either.
func (tdb *taskDB) recoverStaged() error {
	mp := metaKey(metaApplied)
	var epochs []uint64
	err := tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: mp})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != len(mp)+8 {
				return fmt.Errorf("%w: applied marker %x", errBadKey, k)
			}
			epochs = append(epochs, binary.BigEndian.Uint64(k[len(mp):]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range epochs {
		tdb.db.log.Warn("finishing an Apply interrupted by a crash", "task", tdb.id, "epoch", e)
		if err := tdb.finishStaged(e); err != nil {
			return err
		}
	}
	var stale bool
	_ = tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{nsStaged}})
		defer it.Close()
		it.Rewind()
		stale = it.Valid() && bytes.HasPrefix(it.Item().Key(), []byte{nsStaged})
		return nil
	})
	if stale {
		tdb.db.log.Warn("dropping staged writes of an Apply that never committed", "task", tdb.id)
		return tdb.dropPrefix([]byte{nsStaged})
	}
	return nil
}
