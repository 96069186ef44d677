package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	badger "github.com/tidemark-streams/tidemark/third_party/badger"

	"github.com/tidemark-streams/tidemark/store"
)

// TopicPartition names one partition of a topic: a changelog partition in
// this package; the service (package processor) names its input and sink
// partitions with it too.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// ChangelogOffsets maps changelog partitions to the next offset to read: one
// past the last record (or transaction marker) the state reflects. The
// inputs the state reflects are its InputPosition.
type ChangelogOffsets map[TopicPartition]int64

// AppliedOffset is what Badger records for a changelog partition.
type AppliedOffset struct {
	Offset int64
	// At is when the offset was last applied or verified; a restore from
	// an offset older than the topic's delete.retention.ms may have missed
	// tombstones the cleaner has since removed.
	At time.Time
	// TopicID is the changelog topic's id when the offset was applied
	// (zero: not recorded, by an older version or before any restore). An
	// offset of another incarnation of the topic (deleted and recreated,
	// say by an application reset) means nothing in this one.
	TopicID [16]byte
}

func encodeApplied(offset int64, at time.Time, topicID [16]byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 32), uint64(offset))
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
	if topicID != ([16]byte{}) {
		b = append(b, topicID[:]...)
	}
	return b
}

func decodeApplied(v []byte) (AppliedOffset, error) {
	if len(v) != 16 && len(v) != 32 {
		return AppliedOffset{}, fmt.Errorf("%w: applied offset of %d bytes", errBadKey, len(v))
	}
	a := AppliedOffset{
		Offset: int64(binary.BigEndian.Uint64(v)),
		At:     time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:]))),
	}
	copy(a.TopicID[:], v[16:])
	return a, nil
}

// AppliedOffset returns the changelog offset Badger reflects for tp, or
// found=false when the partition was never applied or restored here.
func (db *DB) AppliedOffset(tp TopicPartition) (a AppliedOffset, found bool, err error) {
	defer func() {
		if err != nil {
			a, found, err = AppliedOffset{}, false, fmt.Errorf("changelog: read applied offset of %s: %w", tp, readErr(err))
		}
	}()
	defer recoverRead(db.log, &db.closed, &err, nil)
	err = db.bdb.View(func(txn *badger.Txn) error {
		item, err := txn.Get(offsetKey(tp.Topic, tp.Partition))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error {
			a, err = decodeApplied(v)
			return err
		})
	})
	return a, found, err
}

func (db *DB) readCut(id []byte) (cut int64, err error) {
	defer recoverRead(db.log, &db.closed, &err, nil)
	cut = int64(minTime)
	err = db.bdb.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey(metaCut, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: cut of %d bytes", errBadKey, len(v))
			}
			cut = getTime(v)
			return nil
		})
	})
	return cut, readErr(err)
}

// StoreInstance describes a store instance held in a DB.
type StoreInstance struct {
	Name      string
	Partition int32
	Kind      store.Kind
	Topic     string
}

func encodeRegistry(kind store.Kind, topic string) []byte {
	return append([]byte{kindTag(kind)}, topic...)
}

// register records a store in the registry so that tools can list it.
func (db *DB) register(st *storeState) error {
	if db.opts.ReadOnly {
		return nil
	}
	return db.bdb.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey(metaRegistry, st.id), encodeRegistry(st.spec.Kind, st.topic))
	})
}

// Stores lists the store instances registered in the DB, by name then
// partition.
func (db *DB) Stores() (out []StoreInstance, err error) {
	defer func() {
		if err != nil {
			out, err = nil, fmt.Errorf("changelog: list stores in %s: %w", db.dir, readErr(err))
		}
	}()
	defer recoverRead(db.log, &db.closed, &err, nil)
	prefix := metaKey(metaRegistry)
	err = db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			name, p, err := parseStoreID(it.Item().Key()[len(prefix):])
			if err != nil {
				return err
			}
			err = it.Item().Value(func(v []byte) error {
				if len(v) < 1 {
					return errBadKey
				}
				kind, ok := tagKind(v[0])
				if !ok {
					return fmt.Errorf("%w: store kind tag %q", errBadKey, v[0])
				}
				out = append(out, StoreInstance{Name: name, Partition: p, Kind: kind, Topic: string(v[1:])})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

func (t *TaskState) wrap(st *storeState, op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store %q partition %d: %s: %w", st.spec.Name, t.cfg.Partition, op, err)
}
