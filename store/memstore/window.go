package memstore

import (
	"bytes"
	"math"

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

// Window is an in-memory store.Window: twoTrees of entries, by key then
// start and by start (for expiry).
type Window struct {
	name string
	twoTrees[winEntry]
	probe  winEntry
	closed bool
}

var _ store.Window = (*Window)(nil)

// NewWindow returns an empty window store.
func NewWindow(name string) *Window {
	return &Window{name: name, twoTrees: newTwoTrees(byKeyStart, byStartKey)}
}

func (s *Window) Name() string     { return s.name }
func (s *Window) Kind() store.Kind { return store.KindWindow }

// Close drops the contents; later operations return store.ErrClosed.
func (s *Window) Close() error {
	s.closed = true
	s.clear()
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
			s.delete(e)
		}
		return nil
	}
	if e, ok := s.find(key, start); ok {
		e.value = clone(value)
		return nil
	}
	s.insert(&winEntry{key: clone(key), start: start, value: clone(value)})
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
	s.expire(func(e *winEntry) bool { return e.start < start })
	return nil
}

// minStart is the smallest window start, for open lower bounds.
const minStart = math.MinInt64
