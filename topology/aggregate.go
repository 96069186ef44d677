package topology

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// The pieces every aggregation (grouped stream and table, time, session and
// sliding windows) shares. The operators differ in what they key their
// state by; how they start, fold and check an aggregate is one rule, kept
// here so the five cannot drift apart.

// zeroInit is the init of an Aggregate called with a nil init: the zero
// value. Internally a nil init means reduce (the first value is the
// aggregate), so the public Aggregate methods must not pass nil on.
func zeroInit[VA any](init func() VA) func() VA {
	if init != nil {
		return init
	}
	return func() VA { var z VA; return z }
}

// fold adds v to old, the aggregate found so far; where there is none yet
// (a new key, window or session) it starts from init(), or, for a reduce
// (nil init), takes v itself as the aggregate.
func fold[K, V, VA any](init func() VA, add func(K, V, VA) VA, k K, v V, old VA, found bool) VA {
	switch {
	case found:
		return add(k, v, old)
	case init == nil:
		return any(v).(VA)
	default:
		return add(k, v, init())
	}
}

// storeKey turns an encoded key into a store key, which is never nil: a
// nil key means "unbounded" to range scans, while an empty encoding is a
// real key. It is not generic, so it inlines on the per-record path.
func storeKey(encoded []byte) []byte {
	if encoded == nil {
		return []byte{}
	}
	return encoded
}

// requireAggSerdes fails the build when the aggregate's store could not be
// written: it needs the key serde and the aggregate's value serde.
func requireAggSerdes[K, VA any](b *Builder, node, store string, ks serde.Serde[K], vs serde.Serde[VA]) {
	if ks == nil {
		b.fail(errorf(node, "%w: key serde for store %q", ErrMissingSerde, store))
	}
	if vs == nil {
		b.fail(errorf(node, "%w: aggregate value serde for store %q", ErrMissingSerde, store))
	}
}

// windowRetention is how long, in ms of stream time, a closed window or
// session stays in its store for queries: its grace unless Retention says
// longer. Shorter would drop windows that can still be updated.
func windowRetention(b *Builder, node string, cfg *opConfig, grace int64) int64 {
	if !cfg.hasRetention {
		return grace
	}
	retention := cfg.retention.Milliseconds()
	if retention < grace {
		b.fail(errorf(node, "%w: retention %dms is shorter than grace %dms", ErrInvalidWindow, retention, grace))
	}
	return retention
}
