package memstore

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/store"
)

// Provider opens in-memory stores. Every Open returns a new, empty store:
// in-memory state has nothing to restore, and the test driver models a
// restart by building its tasks again.
type Provider struct{}

var _ store.Provider = Provider{}

// NewProvider returns a store.Provider of in-memory stores.
func NewProvider() Provider { return Provider{} }

// Open returns an empty store of spec.Kind. Logged and ChangelogConfig are
// ignored: nothing in memory is logged.
func (Provider) Open(spec store.Spec, partition int32) (store.Store, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("memstore: open partition %d: store spec has no name", partition)
	}
	switch spec.Kind {
	case store.KindKeyValue:
		return NewKeyValue(spec.Name), nil
	case store.KindWindow:
		return NewWindow(spec.Name), nil
	case store.KindSession:
		return NewSession(spec.Name), nil
	}
	return nil, fmt.Errorf("memstore: open store %q partition %d: unknown kind %d", spec.Name, partition, int(spec.Kind))
}
