package topology

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// Stream is a typed record stream (Kafka Streams' KStream). Methods return
// new streams; a Stream value is cheap to copy and may be used by several
// downstream operators (each gets every record).
//
// A Stream carries the serdes of its keys and values when they are known:
// sources set them, operators that keep a type keep its serde, and
// WithSerdes sets them after a type change. Operators that must serialize
// (sinks, repartition topics, stores) fail Build with ErrMissingSerde when
// the serde they need is unknown.
type Stream[K, V any] struct {
	b  *Builder
	n  *node
	ks serde.Serde[K]
	vs serde.Serde[V]
	// rekeyed is set after an operator that may change the key, so that
	// grouping and joins repartition first.
	rekeyed bool
}

// Stream reads topic as a stream of K, V records.
func (b *Builder) Stream[K, V any](topic string, keys serde.Serde[K], values serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	return b.StreamOf([]string{topic}, keys, values, opts...)
}

// StreamOf reads several topics as one stream.
func (b *Builder) StreamOf[K, V any](topics []string, keys serde.Serde[K], values serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	n := newSource(b, topics, keys, values, newOpConfig(opts), false)
	return Stream[K, V]{b: b, n: n, ks: keys, vs: values}
}

// serdeAs returns s as a Serde[T] when it is one: operators that keep a type
// keep its serde.
func serdeAs[T any](s any) serde.Serde[T] {
	if t, ok := s.(serde.Serde[T]); ok {
		return t
	}
	return nil
}

// WithSerdes sets the serdes of the stream's keys and values, typically
// after Map or MapValues changed their types. A nil serde keeps the current
// one.
func (s Stream[K, V]) WithSerdes(keys serde.Serde[K], values serde.Serde[V]) Stream[K, V] {
	if keys != nil {
		s.ks = keys
	}
	if values != nil {
		s.vs = values
	}
	return s
}

// Name is the name of the operator that produces the stream.
func (s Stream[K, V]) Name() string { return s.n.name }

func (s Stream[K, V]) add(op string, opts []Option, impl nodeImpl) *node {
	return s.b.addNode(KindProcessor, op, []*node{s.n}, newOpConfig(opts), impl)
}

// Filter keeps the records for which keep returns true.
func (s Stream[K, V]) Filter(keep func(K, V) bool, opts ...Option) Stream[K, V] {
	s.n = s.add("FILTER", opts, opFunc[K, V, K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if keep(r.Key, r.Value) {
				return next.forward(r)
			}
			return nil
		}), nil
	}))
	return s
}

// FilterNot drops the records for which drop returns true.
func (s Stream[K, V]) FilterNot(drop func(K, V) bool, opts ...Option) Stream[K, V] {
	s.n = s.add("FILTER", opts, opFunc[K, V, K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if !drop(r.Key, r.Value) {
				return next.forward(r)
			}
			return nil
		}), nil
	}))
	return s
}

// Map replaces key and value. The stream is marked for repartitioning
// before the next grouping or join. f sees the zero K for a null key; the
// key it returns is null only when it is a nil pointer, interface, slice or
// map (see the package documentation); a value of those kinds that is nil
// makes the record a tombstone, as a null value is in Kafka Streams.
func (s Stream[K, V]) Map[K2, V2 any](f func(K, V) (K2, V2), opts ...Option) Stream[K2, V2] {
	null, vnull := keyNull[K2](), keyNull[V2]()
	n := s.add("MAP", opts, opFunc[K, V, K2, V2](func(_ *opEnv, next forwarder[K2, V2]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			k, v := f(r.Key, r.Value)
			return next.forward(Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers,
				Tombstone: r.Tombstone || isNull(vnull, v), NullKey: isNull(null, k)})
		}), nil
	}))
	return Stream[K2, V2]{b: s.b, n: n, ks: serdeAs[K2](s.ks), vs: serdeAs[V2](s.vs), rekeyed: true}
}

// MapValues replaces the value, keeping the key (no repartition needed).
// A tombstone stays one without a call of f; a value f returns nil (a nil
// pointer, interface, slice or map) is a tombstone, as a null value is in
// Kafka Streams.
func (s Stream[K, V]) MapValues[V2 any](f func(K, V) V2, opts ...Option) Stream[K, V2] {
	vnull := keyNull[V2]()
	n := s.add("MAPVALUES", opts, opFunc[K, V, K, V2](func(_ *opEnv, next forwarder[K, V2]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			out := Record[K, V2]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone, NullKey: r.NullKey}
			if !r.Tombstone {
				out.Value = f(r.Key, r.Value)
				out.Tombstone = isNull(vnull, out.Value)
			}
			return next.forward(out)
		}), nil
	}))
	return Stream[K, V2]{b: s.b, n: n, ks: s.ks, vs: serdeAs[V2](s.vs), rekeyed: s.rekeyed}
}

// SelectKey replaces the key, keeping the value; the stream is marked for
// repartitioning. As with Map, the new key is null only when f returns a
// nil pointer, interface, slice or map.
func (s Stream[K, V]) SelectKey[K2 any](f func(K, V) K2, opts ...Option) Stream[K2, V] {
	return s.selectKey[K2]("SELECTKEY", f, opts)
}

func (s Stream[K, V]) selectKey[K2 any](op string, f func(K, V) K2, opts []Option) Stream[K2, V] {
	null := keyNull[K2]()
	n := s.add(op, opts, opFunc[K, V, K2, V](func(_ *opEnv, next forwarder[K2, V]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			k := f(r.Key, r.Value)
			return next.forward(Record[K2, V]{Key: k, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, Tombstone: r.Tombstone, NullKey: isNull(null, k)})
		}), nil
	}))
	return Stream[K2, V]{b: s.b, n: n, ks: serdeAs[K2](s.ks), vs: s.vs, rekeyed: true}
}

// KeyValue is one output of FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// FlatMap turns each record into zero or more records with the input's
// timestamp; the stream is marked for repartitioning. Tombstones are skipped
// (counted as DropSkipped). Keys are null, and values tombstones, as after
// Map.
func (s Stream[K, V]) FlatMap[K2, V2 any](f func(K, V) []KeyValue[K2, V2], opts ...Option) Stream[K2, V2] {
	null, vnull := keyNull[K2](), keyNull[V2]()
	n := s.add("FLATMAP", opts, opFunc[K, V, K2, V2](func(env *opEnv, next forwarder[K2, V2]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if r.Tombstone {
				env.Dropped(env.node, DropSkipped)
				return nil
			}
			for _, kv := range f(r.Key, r.Value) {
				if err := next.forward(Record[K2, V2]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers,
					Tombstone: isNull(vnull, kv.Value), NullKey: isNull(null, kv.Key)}); err != nil {
					return err
				}
			}
			return nil
		}), nil
	}))
	return Stream[K2, V2]{b: s.b, n: n, ks: serdeAs[K2](s.ks), vs: serdeAs[V2](s.vs), rekeyed: true}
}

// FlatMapValues turns each value into zero or more values under the same
// key (a null key stays null). Tombstones are skipped (counted as
// DropSkipped); a nil value it returns is a tombstone, as after MapValues.
func (s Stream[K, V]) FlatMapValues[V2 any](f func(K, V) []V2, opts ...Option) Stream[K, V2] {
	vnull := keyNull[V2]()
	n := s.add("FLATMAPVALUES", opts, opFunc[K, V, K, V2](func(env *opEnv, next forwarder[K, V2]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if r.Tombstone {
				env.Dropped(env.node, DropSkipped)
				return nil
			}
			for _, v := range f(r.Key, r.Value) {
				if err := next.forward(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers,
					Tombstone: isNull(vnull, v), NullKey: r.NullKey}); err != nil {
					return err
				}
			}
			return nil
		}), nil
	}))
	return Stream[K, V2]{b: s.b, n: n, ks: s.ks, vs: serdeAs[V2](s.vs), rekeyed: s.rekeyed}
}

// Peek calls f for each record and forwards it unchanged; for logging and
// metrics, not for effects that must happen exactly once.
func (s Stream[K, V]) Peek(f func(K, V), opts ...Option) Stream[K, V] {
	s.n = s.add("PEEK", opts, opFunc[K, V, K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			f(r.Key, r.Value)
			return next.forward(r)
		}), nil
	}))
	return s
}

// Foreach calls f for each record; it ends the stream.
func (s Stream[K, V]) Foreach(f func(K, V), opts ...Option) {
	s.add("FOREACH", opts, opFunc[K, V, K, V](func(_ *opEnv, _ forwarder[K, V]) (receiver[K, V], error) {
		return receiverFunc[K, V](func(r Record[K, V]) error {
			f(r.Key, r.Value)
			return nil
		}), nil
	}))
}

// Merge interleaves s and other in processing order. The result needs
// repartitioning if either input does.
func (s Stream[K, V]) Merge(other Stream[K, V], opts ...Option) Stream[K, V] {
	n := s.b.addNode(KindProcessor, "MERGE", []*node{s.n, other.n}, newOpConfig(opts),
		opFunc[K, V, K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
			return receiverFunc[K, V](next.forward), nil
		}))
	s.b.checkSame(n, other.b)
	out := Stream[K, V]{b: s.b, n: n, ks: s.ks, vs: s.vs, rekeyed: s.rekeyed || other.rekeyed}
	if out.ks == nil {
		out.ks = other.ks
	}
	if out.vs == nil {
		out.vs = other.vs
	}
	return out
}
