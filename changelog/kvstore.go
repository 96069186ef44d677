package changelog

import (
	"github.com/tidemark-streams/tidemark/store"
)

// kvStore is a store.KeyValue over a task's overlay and Badger. Its suffix
// is the raw key, so Badger's order is the contract's order.
type kvStore struct {
	t  *TaskState
	st *storeState
}

var _ store.KeyValue = (*kvStore)(nil)

func (s *kvStore) Name() string     { return s.st.spec.Name }
func (s *kvStore) Kind() store.Kind { return store.KindKeyValue }

// Close closes this view; the overlay stays with the task.
func (s *kvStore) Close() error { s.st.closed = true; return nil }

func (s *kvStore) Get(key []byte) ([]byte, bool, error) {
	if err := s.t.check(s.st, false); err != nil {
		return nil, false, err
	}
	v, ok, err := s.t.getKV(s.t.key(s.st, key))
	if err != nil {
		return nil, false, s.t.wrap(s.st, "get", err)
	}
	return v, ok, nil
}

func (s *kvStore) Put(key, value []byte) error {
	if err := s.t.check(s.st, true); err != nil {
		return err
	}
	s.t.set(s.st, s.t.key(s.st, key), value)
	return nil
}

func (s *kvStore) Delete(key []byte) error { return s.Put(key, nil) }

func (s *kvStore) Range(from, to []byte, fn func(key, value []byte) bool) error {
	if err := s.t.check(s.st, false); err != nil {
		return err
	}
	p := s.st.dprefix
	lo := append(append([]byte(nil), p...), from...)
	var hi []byte
	if to != nil {
		hi = append(append([]byte(nil), p...), to...)
	} else {
		hi = prefixEnd(p)
	}
	err := s.t.scan(s.st, lo, hi, func(k, v []byte) bool { return fn(k[len(p):], v) })
	return s.t.wrap(s.st, "range", err)
}
