package changelog

import (
	"github.com/tidemark-streams/tidemark/store"
)

// sessionStore is a store.Session over a task's overlay and Badger. Its
// suffix is esc(key) + end + start: FindSessions seeks to the earliest end
// and reads in end, start order.
type sessionStore struct {
	t   *TaskState
	st  *storeState
	buf []byte
}

var _ store.Session = (*sessionStore)(nil)

func (s *sessionStore) Name() string     { return s.st.spec.Name }
func (s *sessionStore) Kind() store.Kind { return store.KindSession }
func (s *sessionStore) Close() error     { s.st.closed = true; return nil }

func (s *sessionStore) suffix(key []byte, start, end int64) []byte {
	s.buf = putTime(putTime(escape(s.buf[:0], key), end), start)
	return s.buf
}

func (s *sessionStore) FindSessions(key []byte, earliestEnd, latestStart int64, fn func(start, end int64, value []byte) bool) error {
	if err := s.t.check(s.st, false); err != nil {
		return err
	}
	earliestEnd = max(earliestEnd, s.st.cutOf())
	p := s.st.dprefix
	ek := escape(append([]byte(nil), p...), key)
	lo := putTime(append([]byte(nil), ek...), earliestEnd)
	err := s.t.scan(s.st, lo, prefixEnd(ek), func(k, v []byte) bool {
		start := getTime(k[len(k)-8:])
		if start > latestStart {
			return true
		}
		return fn(start, getTime(k[len(k)-16:len(k)-8]), v)
	})
	return s.t.wrap(s.st, "find sessions", err)
}

func (s *sessionStore) Put(key []byte, start, end int64, value []byte) error {
	if err := s.t.check(s.st, true); err != nil {
		return err
	}
	if end < s.st.cutOf() {
		return nil
	}
	s.t.set(s.st, s.t.key(s.st, s.suffix(key, start, end)), value)
	return nil
}

func (s *sessionStore) Remove(key []byte, start, end int64) error { return s.Put(key, start, end, nil) }

// ExpireBefore raises the store's expiry cut; see windowStore.ExpireBefore.
func (s *sessionStore) ExpireBefore(end int64) error {
	if err := s.t.check(s.st, true); err != nil {
		return err
	}
	s.st.newCut = max(s.st.newCut, end)
	return nil
}
