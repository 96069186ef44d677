package memstore

import (
	"bytes"

	"github.com/google/btree"

	"github.com/tidemark-streams/tidemark/store"
)

type sessEntry struct {
	key        []byte
	start, end int64
	value      []byte
}

// byKeyEndStart orders sessions for FindSessions: key, end, start.
func byKeyEndStart(a, b *sessEntry) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	if a.end != b.end {
		return a.end < b.end
	}
	return a.start < b.start
}

// byEndKeyStart orders sessions for expiry: end, key, start.
func byEndKeyStart(a, b *sessEntry) bool {
	if a.end != b.end {
		return a.end < b.end
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.start < b.start
}

// Session is an in-memory store.Session, two trees over shared entries like
// Window.
type Session struct {
	name   string
	byKey  *btree.BTreeG[*sessEntry]
	byEnd  *btree.BTreeG[*sessEntry]
	probe  sessEntry
	closed bool
}

var _ store.Session = (*Session)(nil)

// NewSession returns an empty session store.
func NewSession(name string) *Session {
	return &Session{
		name:  name,
		byKey: btree.NewG(degree, byKeyEndStart),
		byEnd: btree.NewG(degree, byEndKeyStart),
	}
}

func (s *Session) Name() string     { return s.name }
func (s *Session) Kind() store.Kind { return store.KindSession }

// Close drops the contents; later operations return store.ErrClosed.
func (s *Session) Close() error {
	s.closed = true
	s.byKey.Clear(false)
	s.byEnd.Clear(false)
	return nil
}

// Len returns the number of sessions held.
func (s *Session) Len() int { return s.byKey.Len() }

func (s *Session) find(key []byte, start, end int64) (*sessEntry, bool) {
	s.probe.key, s.probe.start, s.probe.end = key, start, end
	e, ok := s.byKey.Get(&s.probe)
	s.probe.key = nil
	return e, ok
}

func (s *Session) FindSessions(key []byte, earliestEnd, latestStart int64, fn func(start, end int64, value []byte) bool) error {
	if s.closed {
		return store.ErrClosed
	}
	s.byKey.AscendGreaterOrEqual(&sessEntry{key: key, end: earliestEnd, start: minStart}, func(e *sessEntry) bool {
		if !bytes.Equal(e.key, key) {
			return false
		}
		if e.start > latestStart {
			return true
		}
		return fn(e.start, e.end, e.value)
	})
	return nil
}

func (s *Session) Put(key []byte, start, end int64, value []byte) error {
	if s.closed {
		return store.ErrClosed
	}
	if value == nil {
		return s.Remove(key, start, end)
	}
	if e, ok := s.find(key, start, end); ok {
		e.value = clone(value)
		return nil
	}
	e := &sessEntry{key: clone(key), start: start, end: end, value: clone(value)}
	s.byKey.ReplaceOrInsert(e)
	s.byEnd.ReplaceOrInsert(e)
	return nil
}

func (s *Session) Remove(key []byte, start, end int64) error {
	if s.closed {
		return store.ErrClosed
	}
	if e, ok := s.find(key, start, end); ok {
		s.byKey.Delete(e)
		s.byEnd.Delete(e)
	}
	return nil
}

func (s *Session) ExpireBefore(end int64) error {
	if s.closed {
		return store.ErrClosed
	}
	for {
		e, ok := s.byEnd.Min()
		if !ok || e.end >= end {
			return nil
		}
		s.byEnd.DeleteMin()
		s.byKey.Delete(e)
	}
}
