package store

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// TypedSession is a Session with typed keys and values.
type TypedSession[K, V any] struct {
	s Session
	codec[K, V]
}

// NewTypedSession wraps s with serdes for its keys and values.
func NewTypedSession[K, V any](s Session, keys serde.Serde[K], values serde.Serde[V]) *TypedSession[K, V] {
	return &TypedSession[K, V]{s: s, codec: codec[K, V]{st: s, keys: keys, values: values}}
}

// Store returns the byte store underneath.
func (t *TypedSession[K, V]) Store() Session { return t.s }

// FindSessions calls fn for the sessions of k that end at or after
// earliestEnd and start at or before latestStart, ordered by end then start.
func (t *TypedSession[K, V]) FindSessions(k K, earliestEnd, latestStart int64, fn func(start, end int64, v V) bool) error {
	kb, err := t.encodeOwnKey(k, "key")
	if err != nil {
		return err
	}
	var derr error
	err = t.s.FindSessions(kb, earliestEnd, latestStart, func(start, end int64, vb []byte) bool {
		v, err := t.decodeValue(vb)
		if err != nil {
			derr = err
			return false
		}
		return fn(start, end, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// Put sets the value of session [start, end] of k.
func (t *TypedSession[K, V]) Put(k K, start, end int64, v V) error {
	kb, vb, err := t.encodeEntry(k, v)
	if err != nil {
		return err
	}
	return t.s.Put(kb, start, end, vb)
}

// Remove deletes session [start, end] of k.
func (t *TypedSession[K, V]) Remove(k K, start, end int64) error {
	kb, err := t.encodeKey(k)
	if err != nil {
		return err
	}
	return t.s.Remove(kb, start, end)
}

// ExpireBefore drops every session whose end is < end.
func (t *TypedSession[K, V]) ExpireBefore(end int64) error { return t.s.ExpireBefore(end) }
