package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	badger "github.com/dgraph-io/badger/v4"

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

// AppliedOffset returns the changelog offset the state directory reflects
// for tp, or found=false when the partition was never applied or restored
// here. It opens every task DB of the directory (a call for tools and
// tests): the task DB that holds tp is not named.
func (db *DB) AppliedOffset(tp TopicPartition) (a AppliedOffset, found bool, err error) {
	tdbs, err := db.pinAll()
	if err != nil {
		return AppliedOffset{}, false, fmt.Errorf("changelog: read applied offset of %s: %w", tp, err)
	}
	for _, tdb := range tdbs {
		if a, found, err = tdb.appliedOffset(tp); err != nil || found {
			return a, found, err
		}
	}
	return AppliedOffset{}, false, nil
}

// appliedOffset returns the changelog offset tdb reflects for tp.
func (tdb *taskDB) appliedOffset(tp TopicPartition) (a AppliedOffset, found bool, err error) {
	defer func() {
		if err != nil {
			a, found, err = AppliedOffset{}, false, fmt.Errorf("changelog: read applied offset of %s: %w", tp, tdb.noteErr(readErr(err)))
		}
	}()
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	err = tdb.bdb.View(func(txn *badger.Txn) error {
		a, found, err = readApplied(txn, tp)
		return err
	})
	return a, found, err
}

func readApplied(txn *badger.Txn, tp TopicPartition) (a AppliedOffset, found bool, err error) {
	item, err := txn.Get(offsetKey(tp.Topic, tp.Partition))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return AppliedOffset{}, false, nil
	}
	if err != nil {
		return AppliedOffset{}, false, err
	}
	err = item.Value(func(v []byte) error {
		a, err = decodeApplied(v)
		return err
	})
	return a, err == nil, err
}

func (tdb *taskDB) readCut(id []byte) (cut int64, err error) {
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	cut = int64(minTime)
	err = tdb.bdb.View(func(txn *badger.Txn) error {
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
	return cut, tdb.noteErr(readErr(err))
}

// StoreInstance describes a store instance held in a DB.
type StoreInstance struct {
	Name      string
	Partition int32
	Kind      store.Kind
	Topic     string
	// Task is the task whose DB holds the store ("" in a state directory
	// of format 1). Scan and Register use it when it is set.
	Task string
}

func encodeRegistry(kind store.Kind, topic string) []byte {
	return append([]byte{kindTag(kind)}, topic...)
}

// register records a store in the task DB's registry so that tools can
// list it.
func (tdb *taskDB) register(id []byte, kind store.Kind, topic string) error {
	if tdb.db.opts.ReadOnly {
		return nil
	}
	return tdb.bdb.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey(metaRegistry, id), encodeRegistry(kind, topic))
	})
}

// Stores lists the store instances registered in the state directory, by
// name, partition and task. It opens every task DB of the directory.
func (db *DB) Stores() (out []StoreInstance, err error) {
	tdbs, err := db.pinAll()
	if err != nil {
		return nil, fmt.Errorf("changelog: list stores in %s: %w", db.dir, err)
	}
	for _, tdb := range tdbs {
		stores, err := tdb.stores()
		if err != nil {
			return nil, fmt.Errorf("changelog: list stores in %s: %w", db.dir, err)
		}
		out = append(out, stores...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Task < out[j].Task
	})
	return out, nil
}

// stores lists the stores registered in tdb.
func (tdb *taskDB) stores() (out []StoreInstance, err error) {
	defer func() {
		if err != nil {
			err = tdb.noteErr(readErr(err))
		}
	}()
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	prefix := metaKey(metaRegistry)
	err = tdb.bdb.View(func(txn *badger.Txn) error {
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
				out = append(out, StoreInstance{Name: name, Partition: p, Kind: kind, Topic: string(v[1:]), Task: tdb.id})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// holds reports whether tdb has store name, partition registered.
func (tdb *taskDB) holds(txn *badger.Txn, id []byte) (bool, error) {
	_, err := txn.Get(metaKey(metaRegistry, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// locate returns the task DB that holds store name, partition, opening
// every task DB of the directory (tools); nil when none does.
func (db *DB) locate(name string, partition int32) (*taskDB, error) {
	tdbs, err := db.pinAll()
	if err != nil {
		return nil, err
	}
	id := storeID(name, partition)
	for _, tdb := range tdbs {
		var found bool
		err := tdb.bdb.View(func(txn *badger.Txn) error {
			var err error
			found, err = tdb.holds(txn, id)
			return err
		})
		if err != nil {
			return nil, tdb.noteErr(readErr(err))
		}
		if found {
			return tdb, nil
		}
	}
	return nil, nil
}

func (t *TaskState) wrap(st *storeState, op string, err error) error {
	if err == nil {
		return nil
	}
	if t.tdb != nil {
		t.tdb.noteErr(err)
	}
	return fmt.Errorf("store %q partition %d: %s: %w", st.spec.Name, t.cfg.Partition, op, err)
}

// storeDB returns, pinned, the task DB a DB-level call writes store name,
// partition to: task when it is set, else the task DB that holds the
// store, else the partition's default one.
func (db *DB) storeDB(name string, partition int32, task string) (*taskDB, error) {
	tdb, task, err := db.resolveStoreTask(name, partition, task)
	if err != nil || tdb != nil {
		return tdb, err
	}
	return db.acquire(task, true)
}

// resolveStoreTask names the task DB of store name, partition: task when
// it is set, else the open task DB that holds the store (returned,
// pinned), else the partition's default task id.
func (db *DB) resolveStoreTask(name string, partition int32, task string) (*taskDB, string, error) {
	if task == "" {
		tdb, err := db.locate(name, partition)
		if err != nil || tdb != nil {
			return tdb, "", err
		}
		task = defaultTaskID(partition)
	}
	if !validTaskID(task) {
		return nil, "", fmt.Errorf("changelog: task id %q: want letters, digits, '_' and '-'", task)
	}
	return nil, task, nil
}

// findStoreDB is storeDB for reads: it opens no task DB that does not
// exist, and returns nil when none holds the store.
func (db *DB) findStoreDB(name string, partition int32, task string) (*taskDB, error) {
	if db.legacy {
		return db.acquire("", true)
	}
	tdb, task, err := db.resolveStoreTask(name, partition, task)
	if err != nil || tdb != nil {
		return tdb, err
	}
	if _, err := os.Stat(db.taskDir(task)); err != nil {
		return nil, nil
	}
	return db.acquire(task, true)
}
