package changelog

import (
	"math"

	"github.com/tidemark-streams/tidemark/store"
)

// windowStore is a store.Window over a task's overlay and Badger. Its
// suffix is esc(key) + start, so one key's windows are contiguous and in
// start order.
type windowStore struct {
	t   *Task
	st  *storeState
	buf []byte
}

var _ store.Window = (*windowStore)(nil)

func (s *windowStore) Name() string     { return s.st.spec.Name }
func (s *windowStore) Kind() store.Kind { return store.KindWindow }
func (s *windowStore) Close() error     { s.st.closed = true; return nil }

func (s *windowStore) suffix(key []byte, start int64) []byte {
	s.buf = putTime(escape(s.buf[:0], key), start)
	return s.buf
}

func (s *windowStore) Put(key []byte, start int64, value []byte) error {
	if err := s.t.check(s.st, true); err != nil {
		return err
	}
	if start < s.st.cutOf() {
		return nil // already expired: the window can never be read again
	}
	s.t.set(s.st, s.t.key(s.st, s.suffix(key, start)), value)
	return nil
}

func (s *windowStore) Fetch(key []byte, start int64) ([]byte, bool, error) {
	if err := s.t.check(s.st, false); err != nil {
		return nil, false, err
	}
	if start < s.st.cutOf() {
		return nil, false, nil
	}
	v, ok, err := s.t.get(s.t.key(s.st, s.suffix(key, start)))
	if err != nil {
		return nil, false, s.t.wrap(s.st, "fetch", err)
	}
	return v, ok, nil
}

func (s *windowStore) FetchRange(key []byte, fromStart, toStart int64, fn func(start int64, value []byte) bool) error {
	if err := s.t.check(s.st, false); err != nil {
		return err
	}
	fromStart = max(fromStart, s.st.cutOf())
	if fromStart > toStart {
		return nil
	}
	p := s.st.dprefix
	ek := escape(append([]byte(nil), p...), key)
	lo := putTime(append([]byte(nil), ek...), fromStart)
	var hi []byte
	if toStart == math.MaxInt64 {
		hi = prefixEnd(ek)
	} else {
		hi = putTime(ek, toStart+1)
	}
	err := s.t.scan(s.st, lo, hi, func(k, v []byte) bool { return fn(getTime(k[len(k)-8:]), v) })
	return s.t.wrap(s.st, "fetch range", err)
}

func (s *windowStore) FetchAll(fromStart, toStart int64, fn func(key []byte, start int64, value []byte) bool) error {
	if err := s.t.check(s.st, false); err != nil {
		return err
	}
	fromStart = max(fromStart, s.st.cutOf())
	if fromStart > toStart {
		return nil
	}
	p := s.st.dprefix
	var derr error
	err := s.t.scan(s.st, p, prefixEnd(p), func(k, v []byte) bool {
		start := getTime(k[len(k)-8:])
		if start < fromStart || start > toStart {
			return true
		}
		key, _, err := unescape(k[len(p) : len(k)-8])
		if err != nil {
			derr = err
			return false
		}
		return fn(key, start, v)
	})
	if err == nil {
		err = derr
	}
	return s.t.wrap(s.st, "fetch all", err)
}

// ExpireBefore raises the store's expiry cut. Reads hide expired windows at
// once; Badger drops them, through the time index, at the next Apply.
func (s *windowStore) ExpireBefore(start int64) error {
	if err := s.t.check(s.st, true); err != nil {
		return err
	}
	s.st.newCut = max(s.st.newCut, start)
	return nil
}
