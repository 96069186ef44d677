package processor

import (
	"bytes"

	"github.com/tidemark-streams/tidemark/store"
)

// versionedRange answers Get and Range on the store of a versioned table
// (topology.Versioned) with each key's latest value, as they answer on any
// table: the store's raw entries are versions in the layout of
// store.VersionedKeyValue, which a plain read would return as is.
func (r storeReader) versionedRange(st store.Store, from, to []byte, res *QueryResult) error {
	vs, err := store.NewVersioned(st.(store.KeyValue), 0) // reads only: the history does not matter
	if err != nil {
		return err
	}
	return vs.Range(from, to, func(k, v []byte, _ int64) bool {
		return r.add(res, KV{Key: bytes.Clone(k), Value: bytes.Clone(v)})
	})
}

// versionedGet answers Get on the store of a versioned table with the
// key's latest value. It reads that version alone: Get used to read the
// range [key, key+"\x00") through versionedRange, which walks every
// version the key holds (its whole history window of updates) and, in
// Badger, the deletes of its expired versions until compaction, to return
// the first.
func (r storeReader) versionedGet(st store.Store, key []byte, res *QueryResult) error {
	vs, err := store.NewVersioned(st.(store.KeyValue), 0) // reads only: the history does not matter
	if err != nil {
		return err
	}
	v, _, ok, err := vs.Get(key)
	if ok {
		r.add(res, KV{Key: bytes.Clone(key), Value: v})
	}
	return err
}
