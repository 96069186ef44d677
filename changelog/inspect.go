package changelog

import (
	"bytes"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// Entry is one stored entry, decoded from its Badger key: what tools show.
type Entry struct {
	Key        []byte
	Start, End int64 // window: Start; session: Start and End
	Value      []byte
}

// ScanOptions select the entries Scan visits.
type ScanOptions struct {
	// Key, when set, visits only that key: its value, its windows or its
	// sessions.
	Key []byte
	// From and To bound key-value scans to [From, To); ignored for window
	// and session stores.
	From, To []byte
}

// Scan calls fn for the applied entries of a store partition in store
// order until fn returns false: for tools (tidemark state), not tasks, so
// it reads Badger only, never an overlay. The slices passed to fn are
// valid during the call.
//
// The store is read from the DB of info.Task when it is set, else from the
// task DB that has it registered, else from the partition's default task
// DB (where DB.Restore puts it); a store no task DB holds has no entries.
func (db *DB) Scan(info StoreInstance, opts ScanOptions, fn func(Entry) bool) error {
	tdb, err := db.findStoreDB(info.Name, info.Partition, info.Task)
	if err == nil && tdb != nil {
		err = tdb.scan(info, opts, fn)
	}
	if err != nil {
		return fmt.Errorf("changelog: scan store %q partition %d: %w", info.Name, info.Partition, err)
	}
	return nil
}

func (tdb *taskDB) scan(info StoreInstance, opts ScanOptions, fn func(Entry) bool) (err error) {
	p := withNS(nsData, storeID(info.Name, info.Partition))
	lo, hi := p, prefixEnd(p)
	switch {
	case info.Kind == store.KindKeyValue && opts.Key != nil:
		lo = append(append([]byte(nil), p...), opts.Key...)
		hi = append(append([]byte(nil), lo...), 0)
	case info.Kind == store.KindKeyValue:
		if opts.From != nil {
			lo = append(append([]byte(nil), p...), opts.From...)
		}
		if opts.To != nil {
			hi = append(append([]byte(nil), p...), opts.To...)
		}
	case opts.Key != nil:
		lo = escape(append([]byte(nil), p...), opts.Key)
		hi = prefixEnd(lo)
	}
	cut := int64(minTime)
	if info.Kind != store.KindKeyValue {
		var err error
		if cut, err = tdb.readCut(storeID(info.Name, info.Partition)); err != nil {
			return err
		}
	}
	var inFn bool
	defer recoverRead(tdb.db.log, &tdb.closed, &err, &inFn)
	err = tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
		defer it.Close()
		for it.Seek(lo); it.Valid(); it.Next() {
			k := it.Item().Key()
			if hi != nil && bytes.Compare(k, hi) >= 0 {
				return nil
			}
			e, err := decodeEntry(info.Kind, k[len(p):])
			if err != nil {
				return fmt.Errorf("key %x: %w", k, err)
			}
			if info.Kind == store.KindWindow && e.Start < cut || info.Kind == store.KindSession && e.End < cut {
				continue // expired, awaiting removal
			}
			more := true
			err = it.Item().Value(func(v []byte) error {
				if err := lostValue(it.Item(), v); err != nil {
					return err
				}
				e.Value = v
				inFn = true
				more = fn(e)
				inFn = false
				return nil
			})
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
		return nil
	})
	return tdb.noteErr(readErr(err))
}

func decodeEntry(kind store.Kind, suffix []byte) (Entry, error) {
	switch kind {
	case store.KindKeyValue:
		return Entry{Key: suffix}, nil
	case store.KindWindow:
		key, rest, err := unescape(suffix)
		if err != nil || len(rest) != 8 {
			return Entry{}, errBadKey
		}
		return Entry{Key: key, Start: getTime(rest)}, nil
	case store.KindSession:
		key, rest, err := unescape(suffix)
		if err != nil || len(rest) != 16 {
			return Entry{}, errBadKey
		}
		return Entry{Key: key, End: getTime(rest), Start: getTime(rest[8:])}, nil
	}
	return Entry{}, fmt.Errorf("%w: kind %d", errBadKey, int(kind))
}

// Register records a store partition in a task DB's registry, as
// TaskState.Open does; replay uses it for stores it rebuilt without a
// topology. The task DB is info.Task when it is set, else the one that
// holds the store already, else the one DB.Restore restores it into
// ("p<partition>").
func (db *DB) Register(info StoreInstance) error {
	if _, ok := tagKind(kindTag(info.Kind)); !ok || info.Kind == 0 {
		return fmt.Errorf("changelog: register store %q: unknown kind %d", info.Name, int(info.Kind))
	}
	tdb, err := db.storeDB(info.Name, info.Partition, info.Task)
	if err == nil {
		err = tdb.register(storeID(info.Name, info.Partition), info.Kind, info.Topic)
	}
	if err != nil {
		return fmt.Errorf("changelog: register store %q partition %d: %w", info.Name, info.Partition, err)
	}
	return nil
}
