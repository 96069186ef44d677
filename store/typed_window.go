package store

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// TypedWindow is a Window with typed keys and values.
type TypedWindow[K, V any] struct {
	w Window
	codec[K, V]
}

// NewTypedWindow wraps w with serdes for its keys and values.
func NewTypedWindow[K, V any](w Window, keys serde.Serde[K], values serde.Serde[V]) *TypedWindow[K, V] {
	return &TypedWindow[K, V]{w: w, codec: codec[K, V]{st: w, keys: keys, values: values}}
}

// Store returns the byte store underneath.
func (s *TypedWindow[K, V]) Store() Window { return s.w }

// Put sets the value of k in the window starting at start.
func (s *TypedWindow[K, V]) Put(k K, start int64, v V) error {
	kb, vb, err := s.encodeEntry(k, v)
	if err != nil {
		return err
	}
	return s.w.Put(kb, start, vb)
}

// Delete removes the window of k starting at start.
func (s *TypedWindow[K, V]) Delete(k K, start int64) error {
	kb, err := s.encodeKey(k)
	if err != nil {
		return err
	}
	return s.w.Put(kb, start, nil)
}

// Fetch returns the value of k in the window starting at start.
func (s *TypedWindow[K, V]) Fetch(k K, start int64) (v V, found bool, err error) {
	kb, err := s.encodeKey(k)
	if err != nil {
		return v, false, err
	}
	vb, found, err := s.w.Fetch(kb, start)
	if err != nil || !found {
		return v, false, err
	}
	v, err = s.decodeValue(vb)
	return v, err == nil, err
}

// FetchRange calls fn for the windows of k whose start is in
// [fromStart, toStart], in ascending start order, until fn returns false.
func (s *TypedWindow[K, V]) FetchRange(k K, fromStart, toStart int64, fn func(start int64, v V) bool) error {
	kb, err := s.encodeOwnKey(k, "key")
	if err != nil {
		return err
	}
	var derr error
	err = s.w.FetchRange(kb, fromStart, toStart, func(start int64, vb []byte) bool {
		v, err := s.decodeValue(vb)
		if err != nil {
			derr = err
			return false
		}
		return fn(start, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// FetchAll calls fn for every key's windows whose start is in
// [fromStart, toStart], ordered by encoded key then start.
func (s *TypedWindow[K, V]) FetchAll(fromStart, toStart int64, fn func(k K, start int64, v V) bool) error {
	var derr error
	err := s.w.FetchAll(fromStart, toStart, func(kb []byte, start int64, vb []byte) bool {
		k, err := s.decodeKey(kb)
		if err != nil {
			derr = err
			return false
		}
		v, err := s.decodeValue(vb)
		if err != nil {
			derr = err
			return false
		}
		return fn(k, start, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// ExpireBefore drops every window whose start is < start.
func (s *TypedWindow[K, V]) ExpireBefore(start int64) error { return s.w.ExpireBefore(start) }
