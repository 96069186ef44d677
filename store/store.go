// Package store defines the state store contracts that operators use and
// that every backend implements: the in-memory stores of the test driver and
// the Badger stores of the changelog package.
//
// Stores are byte-oriented: keys and values are already serialized, and keys
// sort by bytes.Compare. Typed access goes through the wrappers in this
// package, which apply serdes at the edge. Keeping backends byte-oriented is
// what lets one Badger DB, one changelog format and one restore path serve
// every store type.
//
// A store instance belongs to exactly one task (one partition of one
// sub-topology) and is used from that task's goroutine only, so
// implementations need no internal locking for the operator path. Slices
// passed to callbacks are valid only during the callback; copy to keep them.
package store

import "errors"

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store: closed")

// Kind says which contract a store implements; it also picks the changelog
// topic's cleanup policy (compact for key-value, compact,delete otherwise).
type Kind int

const (
	KindKeyValue Kind = iota + 1
	KindWindow
	KindSession
)

func (k Kind) String() string {
	switch k {
	case KindKeyValue:
		return "key-value"
	case KindWindow:
		return "window"
	case KindSession:
		return "session"
	}
	return "unknown"
}

// Store is what every state store has.
type Store interface {
	Name() string
	Kind() Kind
	Close() error
}

// KeyValue is a sorted key-value map.
type KeyValue interface {
	Store
	// Get returns the value of key, or found=false when it is absent.
	Get(key []byte) (value []byte, found bool, err error)
	// Put sets key to value. A nil value is a delete (a changelog tombstone).
	Put(key, value []byte) error
	Delete(key []byte) error
	// Range calls fn for each key in [from, to) in ascending order until fn
	// returns false. A nil from or to leaves that side unbounded.
	Range(from, to []byte, fn func(key, value []byte) bool) error
}

// Window holds one value per (key, window start). Windows of a store all have
// the same size; the store only needs the start to address them.
type Window interface {
	Store
	// Put sets the value of key in the window starting at start (ms since the
	// epoch). A nil value deletes it.
	Put(key []byte, start int64, value []byte) error
	Fetch(key []byte, start int64) (value []byte, found bool, err error)
	// FetchRange calls fn for the windows of key whose start is in
	// [fromStart, toStart], in ascending start order, until fn returns false.
	FetchRange(key []byte, fromStart, toStart int64, fn func(start int64, value []byte) bool) error
	// FetchAll calls fn for every key's windows whose start is in
	// [fromStart, toStart], ordered by key then start.
	FetchAll(fromStart, toStart int64, fn func(key []byte, start int64, value []byte) bool) error
	// ExpireBefore drops every window whose start is < start: the retention
	// cut made as stream time advances.
	ExpireBefore(start int64) error
}

// Session holds one value per (key, session [start, end]) where both bounds
// are inclusive event times of the first and last record of the session.
type Session interface {
	Store
	// FindSessions calls fn for the sessions of key that end at or after
	// earliestEnd and start at or before latestStart (the sessions a record
	// could merge with), ordered by end then start.
	FindSessions(key []byte, earliestEnd, latestStart int64, fn func(start, end int64, value []byte) bool) error
	Put(key []byte, start, end int64, value []byte) error
	Remove(key []byte, start, end int64) error
	// ExpireBefore drops every session whose end is < end.
	ExpireBefore(end int64) error
}

// Spec declares a store: the topology builds one per stateful operator and
// the runtime opens one instance per task partition through a Provider.
type Spec struct {
	// Name is stable across topology changes; the changelog topic is
	// "<application id>-<Name>-changelog".
	Name string
	Kind Kind
	// WindowSize is the window length in ms (window stores only).
	WindowSize int64
	// Retention is how long, in ms of stream time, windows or sessions are
	// kept after they end (window and session stores). It bounds the
	// changelog's retention.ms too.
	Retention int64
	// Logged stores are backed by a changelog topic. Unlogged stores are
	// rebuilt by reprocessing, or are caches.
	Logged bool
	// ChangelogConfig overrides topic configs of the changelog, e.g.
	// min.cleanable.dirty.ratio or segment.ms.
	ChangelogConfig map[string]string
}

// Provider opens store instances. The test driver uses in-memory stores;
// the service uses Badger stores with changelogs.
type Provider interface {
	Open(spec Spec, partition int32) (Store, error)
}
