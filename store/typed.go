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

// codec is what the three typed wrappers share: the serdes, the reused
// buffers, and errors that name the store, so a decode error says which
// store holds the bad bytes.
type codec[K, V any] struct {
	st         Store
	keys       serde.Serde[K]
	values     serde.Serde[V]
	kbuf, vbuf []byte
}

func (c *codec[K, V]) errorf(format string, args ...any) error {
	return fmt.Errorf("store %q: "+format, append([]any{c.st.Name()}, args...)...)
}

// encodeKey encodes k into the reused key buffer.
func (c *codec[K, V]) encodeKey(k K) ([]byte, error) {
	b, err := c.keys.Encode(c.kbuf[:0], k)
	if err != nil {
		return nil, c.errorf("encode key: %w", err)
	}
	c.kbuf = b
	return nonNil(b), nil
}

// encodeOwnKey encodes k into a buffer of its own, for a key that must stay
// valid while fn of an iteration runs: fn may call back into the wrapper.
// what names the key in errors.
func (c *codec[K, V]) encodeOwnKey(k K, what string) ([]byte, error) {
	b, err := c.keys.Encode(nil, k)
	if err != nil {
		return nil, c.errorf("encode %s: %w", what, err)
	}
	return nonNil(b), nil
}

// encodeValue encodes v into the reused value buffer. An empty encoding is
// a value, never a delete, so it is never nil.
func (c *codec[K, V]) encodeValue(v V) ([]byte, error) {
	b, err := c.values.Encode(c.vbuf[:0], v)
	if err != nil {
		return nil, c.errorf("encode value: %w", err)
	}
	c.vbuf = nonNil(b)
	return c.vbuf, nil
}

// encodeEntry encodes k and v into the reused buffers, for a Put.
func (c *codec[K, V]) encodeEntry(k K, v V) (kb, vb []byte, err error) {
	if kb, err = c.encodeKey(k); err != nil {
		return nil, nil, err
	}
	if vb, err = c.encodeValue(v); err != nil {
		return nil, nil, err
	}
	return kb, vb, nil
}

func (c *codec[K, V]) decodeKey(b []byte) (K, error) {
	k, err := c.keys.Decode(b)
	if err != nil {
		return k, c.errorf("decode key: %w", err)
	}
	return k, nil
}

func (c *codec[K, V]) decodeValue(b []byte) (V, error) {
	v, err := c.values.Decode(b)
	if err != nil {
		return v, c.errorf("decode value: %w", err)
	}
	return v, nil
}

// TypedKeyValue is a KeyValue with typed keys and values.
type TypedKeyValue[K, V any] struct {
	kv KeyValue
	codec[K, V]
}

// NewTypedKeyValue wraps kv with serdes for its keys and values.
func NewTypedKeyValue[K, V any](kv KeyValue, keys serde.Serde[K], values serde.Serde[V]) *TypedKeyValue[K, V] {
	return &TypedKeyValue[K, V]{kv: kv, codec: codec[K, V]{st: kv, keys: keys, values: values}}
}

// Store returns the byte store underneath.
func (s *TypedKeyValue[K, V]) Store() KeyValue { return s.kv }

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
	v, err = s.decodeValue(vb)
	return v, err == nil, err
}

// Put sets k to v.
func (s *TypedKeyValue[K, V]) Put(k K, v V) error {
	kb, vb, err := s.encodeEntry(k, v)
	if err != nil {
		return err
	}
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
	fb, err := s.encodeOwnKey(from, "range start")
	if err != nil {
		return err
	}
	tb, err := s.encodeOwnKey(to, "range end")
	if err != nil {
		return err
	}
	return s.scan(fb, tb, fn)
}

// All calls fn for every key in order until fn returns false.
func (s *TypedKeyValue[K, V]) All(fn func(k K, v V) bool) error {
	return s.scan(nil, nil, fn)
}

func (s *TypedKeyValue[K, V]) scan(from, to []byte, fn func(k K, v V) bool) error {
	var derr error
	err := s.kv.Range(from, to, func(kb, vb []byte) bool {
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
