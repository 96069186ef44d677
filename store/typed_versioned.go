package store

import "github.com/tidemark-streams/tidemark/serde"

// TypedVersioned is a Versioned store with typed keys and values.
type TypedVersioned[K, V any] struct {
	vs Versioned
	codec[K, V]
}

// NewTypedVersioned wraps vs with serdes for its keys and values.
func NewTypedVersioned[K, V any](vs Versioned, keys serde.Serde[K], values serde.Serde[V]) *TypedVersioned[K, V] {
	return &TypedVersioned[K, V]{vs: vs, codec: codec[K, V]{st: vs, keys: keys, values: values}}
}

// Store returns the byte store underneath.
func (s *TypedVersioned[K, V]) Store() Versioned { return s.vs }

// Put adds the version (v, ts) of k (see Versioned.Put).
func (s *TypedVersioned[K, V]) Put(k K, ts int64, v V) error {
	kb, vb, err := s.encodeEntry(k, v)
	if err != nil {
		return err
	}
	return s.vs.Put(kb, ts, vb)
}

// Delete deletes k as of ts: a tombstone version.
func (s *TypedVersioned[K, V]) Delete(k K, ts int64) error {
	kb, err := s.encodeKey(k)
	if err != nil {
		return err
	}
	return s.vs.Put(kb, ts, nil)
}

// Get returns the latest value of k and its timestamp.
func (s *TypedVersioned[K, V]) Get(k K) (v V, ts int64, found bool, err error) {
	kb, err := s.encodeKey(k)
	if err != nil {
		return v, 0, false, err
	}
	vb, ts, found, err := s.vs.Get(kb)
	if err != nil || !found {
		return v, 0, false, err
	}
	v, err = s.decodeValue(vb)
	return v, ts, err == nil, err
}

// GetAsOf returns the value of k valid at asOf and when it became valid
// (see Versioned.GetAsOf: before the store's cutoff only the latest
// version is found).
func (s *TypedVersioned[K, V]) GetAsOf(k K, asOf int64) (v V, validFrom int64, found bool, err error) {
	kb, err := s.encodeKey(k)
	if err != nil {
		return v, 0, false, err
	}
	vb, validFrom, found, err := s.vs.GetAsOf(kb, asOf)
	if err != nil || !found {
		return v, 0, false, err
	}
	v, err = s.decodeValue(vb)
	return v, validFrom, err == nil, err
}

// LatestTimestamp returns the timestamp of k's latest version, a delete
// included (see Versioned.LatestTimestamp).
func (s *TypedVersioned[K, V]) LatestTimestamp(k K) (ts int64, found bool, err error) {
	kb, err := s.encodeKey(k)
	if err != nil {
		return 0, false, err
	}
	return s.vs.LatestTimestamp(kb)
}
