// Package memstore holds the in-memory state stores: sorted maps behind the
// interfaces of package store. The broker-free test driver runs tasks on
// them, and the Badger stores of package changelog are tested against the
// same conformance suite (package storetest), so an operator behaves the
// same on both.
//
// The stores are B-trees of pointers to entries. Updating an existing entry
// replaces its value in place, so the common read-modify-write of an
// aggregation costs one tree descent and one value copy, and lookups use a
// probe entry owned by the store instead of allocating one per call. That is
// also why a store must stay on one goroutine, as package store requires.
//
// Values returned by Get and Fetch, and slices passed to callbacks, are the
// store's own copies: they stay valid (a later Put allocates a new value
// rather than overwriting the old one) but callers must not modify them.
package memstore

import (
	"bytes"

	"github.com/google/btree"

	"github.com/tidemark-streams/tidemark/store"
)

// degree of the B-trees: wide nodes keep trees shallow and cache friendly.
const degree = 32

type kvEntry struct {
	key, value []byte
}

func lessKV(a, b *kvEntry) bool { return bytes.Compare(a.key, b.key) < 0 }

// KeyValue is an in-memory store.KeyValue.
type KeyValue struct {
	name   string
	tree   *btree.BTreeG[*kvEntry]
	probe  kvEntry
	closed bool
}

var _ store.KeyValue = (*KeyValue)(nil)

// NewKeyValue returns an empty key-value store.
func NewKeyValue(name string) *KeyValue {
	return &KeyValue{name: name, tree: btree.NewG(degree, lessKV)}
}

func (s *KeyValue) Name() string     { return s.name }
func (s *KeyValue) Kind() store.Kind { return store.KindKeyValue }

// Close drops the contents; later operations return store.ErrClosed.
func (s *KeyValue) Close() error {
	s.closed = true
	s.tree.Clear(false)
	return nil
}

// Len returns the number of keys.
func (s *KeyValue) Len() int { return s.tree.Len() }

func (s *KeyValue) find(key []byte) (*kvEntry, bool) {
	s.probe.key = key
	e, ok := s.tree.Get(&s.probe)
	s.probe.key = nil
	return e, ok
}

func (s *KeyValue) Get(key []byte) ([]byte, bool, error) {
	if s.closed {
		return nil, false, store.ErrClosed
	}
	e, ok := s.find(key)
	if !ok {
		return nil, false, nil
	}
	return e.value, true, nil
}

func (s *KeyValue) Put(key, value []byte) error {
	if s.closed {
		return store.ErrClosed
	}
	if value == nil {
		return s.Delete(key)
	}
	if e, ok := s.find(key); ok {
		e.value = clone(value)
		return nil
	}
	s.tree.ReplaceOrInsert(&kvEntry{key: clone(key), value: clone(value)})
	return nil
}

func (s *KeyValue) Delete(key []byte) error {
	if s.closed {
		return store.ErrClosed
	}
	s.probe.key = key
	s.tree.Delete(&s.probe)
	s.probe.key = nil
	return nil
}

func (s *KeyValue) Range(from, to []byte, fn func(key, value []byte) bool) error {
	if s.closed {
		return store.ErrClosed
	}
	if from != nil && to != nil && bytes.Compare(from, to) >= 0 {
		return nil
	}
	iter := func(e *kvEntry) bool { return fn(e.key, e.value) }
	// Range bounds get their own entries: fn may call back into the store,
	// which reuses the probe.
	switch {
	case from == nil && to == nil:
		s.tree.Ascend(iter)
	case from == nil:
		s.tree.AscendLessThan(&kvEntry{key: to}, iter)
	case to == nil:
		s.tree.AscendGreaterOrEqual(&kvEntry{key: from}, iter)
	default:
		s.tree.AscendRange(&kvEntry{key: from}, &kvEntry{key: to}, iter)
	}
	return nil
}

// clone copies b, keeping a non-nil empty slice non-nil: an empty value is
// a value, not a delete.
func clone(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}
