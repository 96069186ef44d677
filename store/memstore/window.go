package memstore

import (
	"bytes"
	"math"

	"github.com/google/btree"

	"github.com/tidemark-streams/tidemark/store"
)

type winEntry struct {
	key   []byte
	start int64
	value []byte
}

// byKeyStart orders windows for fetches: key, then start.
func byKeyStart(a, b *winEntry) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.start < b.start
}

// byStartKey orders windows for expiry: start, then key.
func byStartKey(a, b *winEntry) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	return bytes.Compare(a.key, b.key) < 0
}

// Window is an in-memory store.Window. Entries sit in two trees sharing the
// same pointers: one ordered for fetches and one by start, so ExpireBefore
// touches only the windows it drops.
type Window struct {
	name    string
	byKey   *btree.BTreeG[*winEntry]
	byStart *btree.BTreeG[*winEntry]
	probe   winEntry
	closed  bool
}

var _ store.Window = (*Window)(nil)

// NewWindow returns an empty window store.
func NewWindow(name string) *Window {
	return &Window{
		name:    name,
		byKey:   btree.NewG(degree, byKeyStart),
		byStart: btree.NewG(degree, byStartKey),
	}
}

func (s *Window) Name() string     { return s.name }
func (s *Window) Kind() store.Kind { return store.KindWindow }

// Close drops the contents; later operations return store.ErrClosed.
func (s *Window) Close() error {
	s.closed = true
	s.byKey.Clear(false)
	s.byStart.Clear(false)
	return nil
}

// Len returns the number of windows held.
func (s *Window) Len() int { return s.byKey.Len() }

func (s *Window) find(key []byte, start int64) (*winEntry, bool) {
	s.probe.key, s.probe.start = key, start
	e, ok := s.byKey.Get(&s.probe)
	s.probe.key = nil
	return e, ok
}

func (s *Window) Put(key []byte, start int64, value []byte) error {
	if s.closed {
		return store.ErrClosed
	}
	if value == nil {
		if e, ok := s.find(key, start); ok {
			s.byKey.Delete(e)
			s.byStart.Delete(e)
		}
		return nil
	}
	if e, ok := s.find(key, start); ok {
		e.value = clone(value)
		return nil
	}
	e := &winEntry{key: clone(key), start: start, value: clone(value)}
	s.byKey.ReplaceOrInsert(e)
	s.byStart.ReplaceOrInsert(e)
	return nil
}

func (s *Window) Fetch(key []byte, start int64) ([]byte, bool, error) {
	if s.closed {
		return nil, false, store.ErrClosed
	}
	e, ok := s.find(key, start)
	if !ok {
		return nil, false, nil
	}
	return e.value, true, nil
}

func (s *Window) FetchRange(key []byte, fromStart, toStart int64, fn func(start int64, value []byte) bool) error {
	if s.closed {
		return store.ErrClosed
	}
	if fromStart > toStart {
		return nil
	}
	s.byKey.AscendGreaterOrEqual(&winEntry{key: key, start: fromStart}, func(e *winEntry) bool {
		if e.start > toStart || !bytes.Equal(e.key, key) {
			return false
		}
		return fn(e.start, e.value)
	})
	return nil
}

func (s *Window) FetchAll(fromStart, toStart int64, fn func(key []byte, start int64, value []byte) bool) error {
	if s.closed {
		return store.ErrClosed
	}
	if fromStart > toStart {
		return nil
	}
	// A full scan ordered by key: the contract orders by key then start.
	// FetchAll serves punctuators and queries, not the per-record path.
	s.byKey.Ascend(func(e *winEntry) bool {
		if e.start < fromStart || e.start > toStart {
			return true
		}
		return fn(e.key, e.start, e.value)
	})
	return nil
}

func (s *Window) ExpireBefore(start int64) error {
	if s.closed {
		return store.ErrClosed
	}
	for {
		e, ok := s.byStart.Min()
		if !ok || e.start >= start {
			return nil
		}
		s.byStart.DeleteMin()
		s.byKey.Delete(e)
	}
}

// minStart is the smallest window start, for open lower bounds.
const minStart = math.MinInt64
