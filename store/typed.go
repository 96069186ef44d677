package store

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
)

// The typed wrappers put serdes in front of a byte store, so operators work
// with their own key and value types while backends, changelogs and restore
// stay byte-oriented.
//
// Ordering is the byte order of the encoded keys. With the built-in serdes
// that is lexicographic for strings but not numeric for negative int64s
// (two's complement big-endian puts -1 after 1): ranges over signed keys
// need a serde whose encoding preserves order.
//
// A wrapper reuses one encode buffer for keys and one for values. That is
// safe because stores copy on Put, but it makes a wrapper single-goroutine,
// like the store under it. Decode errors stop an iteration and are returned
// wrapped with the store name.

// TypedKeyValue is a KeyValue with typed keys and values.
type TypedKeyValue[K, V any] struct {
	kv         KeyValue
	keys       serde.Serde[K]
	values     serde.Serde[V]
	kbuf, vbuf []byte
}

// NewTypedKeyValue wraps kv with serdes for its keys and values.
func NewTypedKeyValue[K, V any](kv KeyValue, keys serde.Serde[K], values serde.Serde[V]) *TypedKeyValue[K, V] {
	return &TypedKeyValue[K, V]{kv: kv, keys: keys, values: values}
}

// Store returns the byte store underneath.
func (s *TypedKeyValue[K, V]) Store() KeyValue { return s.kv }

func (s *TypedKeyValue[K, V]) encodeKey(k K) ([]byte, error) {
	b, err := s.keys.Encode(s.kbuf[:0], k)
	if err != nil {
		return nil, fmt.Errorf("store %q: encode key: %w", s.kv.Name(), err)
	}
	s.kbuf = b
	return nonNil(b), nil
}

// Get returns the value of k, or found=false when it is absent.
func (s *TypedKeyValue[K, V]) Get(k K) (v V, found bool, err error) {
	kb, err := s.encodeKey(k)
	if err != nil {
		return v, false, err
	}
	vb, found, err := s.kv.Get(kb)
	if err != nil || !found {
		return v, false, err
	}
	v, err = s.values.Decode(vb)
	if err != nil {
		return v, false, fmt.Errorf("store %q: decode value: %w", s.kv.Name(), err)
	}
	return v, true, nil
}

// Put sets k to v.
func (s *TypedKeyValue[K, V]) Put(k K, v V) error {
	kb, err := s.encodeKey(k)
	if err != nil {
		return err
	}
	vb, err := s.values.Encode(s.vbuf[:0], v)
	if err != nil {
		return fmt.Errorf("store %q: encode value: %w", s.kv.Name(), err)
	}
	if vb == nil {
		vb = []byte{} // an empty encoding is a value, never a delete
	}
	s.vbuf = vb
	return s.kv.Put(kb, vb)
}

// Delete removes k.
func (s *TypedKeyValue[K, V]) Delete(k K) error {
	kb, err := s.encodeKey(k)
	if err != nil {
		return err
	}
	return s.kv.Delete(kb)
}

// Range calls fn for each key in [from, to) in encoded-byte order until fn
// returns false.
func (s *TypedKeyValue[K, V]) Range(from, to K, fn func(k K, v V) bool) error {
	fb, err := s.keys.Encode(nil, from)
	if err != nil {
		return fmt.Errorf("store %q: encode range start: %w", s.kv.Name(), err)
	}
	tb, err := s.keys.Encode(nil, to)
	if err != nil {
		return fmt.Errorf("store %q: encode range end: %w", s.kv.Name(), err)
	}
	return s.scan(nonNil(fb), nonNil(tb), fn)
}

// All calls fn for every key in order until fn returns false.
func (s *TypedKeyValue[K, V]) All(fn func(k K, v V) bool) error {
	return s.scan(nil, nil, fn)
}

func (s *TypedKeyValue[K, V]) scan(from, to []byte, fn func(k K, v V) bool) error {
	var derr error
	err := s.kv.Range(from, to, func(kb, vb []byte) bool {
		k, err := s.keys.Decode(kb)
		if err != nil {
			derr = fmt.Errorf("store %q: decode key: %w", s.kv.Name(), err)
			return false
		}
		v, err := s.values.Decode(vb)
		if err != nil {
			derr = fmt.Errorf("store %q: decode value: %w", s.kv.Name(), err)
			return false
		}
		return fn(k, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// nonNil keeps an encoded bound from meaning "unbounded": a nil bound is
// open in the byte API, but an encoded empty key is a real bound.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
