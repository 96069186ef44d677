package tidemarktest

import (
	"bytes"
	"fmt"

	"github.com/tidemark-streams/tidemark/store"
)

// readLatestVersions calls fn with the latest version of each key of a
// versioned store (the layout of store.VersionedKeyValue), in key order,
// skipping keys whose latest version is a delete.
func readLatestVersions(kv store.KeyValue, fn func(key, value []byte, ts int64) bool) error {
	var last []byte
	var perr error
	err := kv.Range([]byte{1}, []byte{2}, func(k, v []byte) bool {
		key, ts, err := store.ParseVersionedKey(k)
		if err != nil {
			perr = err
			return false
		}
		if last != nil && bytes.Equal(key, last) {
			return true // an older version
		}
		last = key
		if len(v) == 0 || v[0] == 0 {
			return true // a delete
		}
		return fn(key, v[1:], ts)
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("tidemarktest: versioned store %q: %w", kv.Name(), err)
	}
	return nil
}
