package store

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
)

// TypedWindow is a Window with typed keys and values.
type TypedWindow[K, V any] struct {
	w          Window
	keys       serde.Serde[K]
	values     serde.Serde[V]
	kbuf, vbuf []byte
}

// NewTypedWindow wraps w with serdes for its keys and values.
func NewTypedWindow[K, V any](w Window, keys serde.Serde[K], values serde.Serde[V]) *TypedWindow[K, V] {
	return &TypedWindow[K, V]{w: w, keys: keys, values: values}
}

// Store returns the byte store underneath.
func (s *TypedWindow[K, V]) Store() Window { return s.w }

func (s *TypedWindow[K, V]) encodeKey(k K) ([]byte, error) {
	b, err := s.keys.Encode(s.kbuf[:0], k)
	if err != nil {
		return nil, fmt.Errorf("store %q: encode key: %w", s.w.Name(), err)
	}
	s.kbuf = b
	return nonNil(b), nil
}

// Put sets the value of k in the window starting at start.
func (s *TypedWindow[K, V]) Put(k K, start int64, v V) error {
	kb, err := s.encodeKey(k)
	if err != nil {
		return err
	}
	vb, err := s.values.Encode(s.vbuf[:0], v)
	if err != nil {
		return fmt.Errorf("store %q: encode value: %w", s.w.Name(), err)
	}
	s.vbuf = nonNil(vb)
	return s.w.Put(kb, start, s.vbuf)
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
	v, err = s.values.Decode(vb)
	if err != nil {
		return v, false, fmt.Errorf("store %q: decode value: %w", s.w.Name(), err)
	}
	return v, true, nil
}

// FetchRange calls fn for the windows of k whose start is in
// [fromStart, toStart], in ascending start order, until fn returns false.
func (s *TypedWindow[K, V]) FetchRange(k K, fromStart, toStart int64, fn func(start int64, v V) bool) error {
	kb, err := s.keys.Encode(nil, k) // not kbuf: fn may call back into s
	if err != nil {
		return fmt.Errorf("store %q: encode key: %w", s.w.Name(), err)
	}
	var derr error
	err = s.w.FetchRange(nonNil(kb), fromStart, toStart, func(start int64, vb []byte) bool {
		v, err := s.values.Decode(vb)
		if err != nil {
			derr = fmt.Errorf("store %q: decode value: %w", s.w.Name(), err)
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
		k, err := s.keys.Decode(kb)
		if err != nil {
			derr = fmt.Errorf("store %q: decode key: %w", s.w.Name(), err)
			return false
		}
		v, err := s.values.Decode(vb)
		if err != nil {
			derr = fmt.Errorf("store %q: decode value: %w", s.w.Name(), err)
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
