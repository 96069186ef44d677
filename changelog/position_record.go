package changelog

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every commit writes, into each logged store's changelog partition, one
// more record: the task's input position (the input offsets the
// transaction commits), under a key of its own (tagPosition). It commits
// atomically with the state changes, so the changelog itself says which
// inputs its state reflects, whatever the group's committed offsets say. A
// broker can serve stale committed offsets (Kafka 4.1's group coordinator,
// reloading after an unclean restart, answered offsets dozens of commits
// old): resuming from them would count inputs the state already reflects a
// second time. With the position in the state, the runtime skips them
// instead. Compaction keeps one such record per changelog partition.

// tagPosition is the changelog key of a partition's input-position record.
const tagPosition = 'p'

// StagePosition sets the input position the transaction being prepared
// commits; Flush writes it to every logged store's changelog, and Apply
// records it with the data. Discard forgets it.
func (t *TaskState) StagePosition(pos InputPosition) { t.stagedPos = pos }

// positionRecords produces the staged position into each logged store's
// changelog partition; promise is Flush's.
func (t *TaskState) positionRecords(produce func(*kgo.Record)) {
	if t.stagedPos == nil || t.stagedPos.String() == t.sentPos.String() {
		return
	}
	v := encodePosition(t.stagedPos)
	for _, st := range t.stores {
		if st.spec.Logged && !st.closed {
			produce(&kgo.Record{Topic: st.topic, Partition: t.cfg.Partition, Key: []byte{tagPosition}, Value: v})
		}
	}
}

// Position is the input position the task's committed state reflects: the
// latest of its stores' recorded positions (they are written together), as
// the last Apply or a restore of the changelog recorded it. found is false
// when no store has one (nothing committed yet, or a changelog written
// before positions were).
func (t *TaskState) Position() (pos InputPosition, found bool, err error) {
	pos = InputPosition{}
	if t.tdb == nil {
		return pos, false, nil // no stores
	}
	err = t.tdb.bdb.View(func(txn *badger.Txn) error {
		for _, st := range t.stores {
			item, err := txn.Get(metaKey(metaPosition, st.id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return readErr(err)
			}
			err = item.Value(func(v []byte) error {
				p, err := decodePosition(v)
				if err != nil {
					return err
				}
				found = true
				pos.Merge(p)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("changelog: read the input position of partition %d: %w", t.cfg.Partition, err)
	}
	return pos, found, nil
}

// applyPosition restores a position record: it becomes the store's
// recorded position, as if Apply had written it.
func (s *restoreState) applyPosition(wb restoreSink, r *kgo.Record) error {
	if _, err := decodePosition(r.Value); err != nil {
		return fmt.Errorf("%w: input position record: %v", errBadKey, err)
	}
	return wb.Set(metaKey(metaPosition, s.id), append([]byte(nil), r.Value...))
}
