package tidemarktest

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/store"
)

// readLatestVersions calls fn with the latest version of each key of a
// versioned store, in key order, skipping keys whose latest version is a
// delete.
func readLatestVersions(kv store.KeyValue, fn func(key, value []byte, ts int64) bool) error {
	vs, err := store.NewVersioned(kv, 0) // reads only: the history does not matter
	if err == nil {
		err = vs.Range(nil, nil, fn)
	}
	if err != nil {
		return fmt.Errorf("tidemarktest: %w", err)
	}
	return nil
}
