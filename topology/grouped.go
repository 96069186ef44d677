package topology

import (
	"fmt"
	"math"

	"github.com/tidemark-streams/tidemark/serde"
)

// GroupedStream is a stream partitioned by its key, ready to aggregate.
type GroupedStream[K, V any] struct {
	s Stream[K, V]
}

// GroupByKey groups by the current key. A stream whose key may have changed
// (Map, SelectKey, FlatMap, Process) is first repartitioned through
// "<app>-<name>-repartition", named by Named or generated. Records with a
// null key are dropped and counted (DropNullKey): by the repartition, or by
// the aggregation when there is none.
func (s Stream[K, V]) GroupByKey(opts ...RepartitionOption) GroupedStream[K, V] {
	if s.rekeyed {
		s = s.repartition("REPARTITION", newOpConfig(opts))
	} else if cfg := newOpConfig(opts); cfg.repartitions() {
		s.b.fail(errorf(s.n.name, "%w: GroupByKey options apply only when a repartition is needed", ErrInvalidTopology))
	}
	return GroupedStream[K, V]{s: s}
}

// GroupBy re-keys records with f and repartitions them by the new key.
// keys is the serde of the new key (nil keeps the stream's, when K2 is K).
// A record f maps to a nil pointer, interface, slice or map is a record
// with a null key: the repartition drops it (DropNullKey).
func (s Stream[K, V]) GroupBy[K2 any](f func(K, V) K2, keys serde.Serde[K2], opts ...RepartitionOption) GroupedStream[K2, V] {
	rk := s.selectKey[K2]("GROUPBY", f, nil)
	if keys != nil {
		rk.ks = keys
	}
	return GroupedStream[K2, V]{s: rk.repartition("REPARTITION", newOpConfig(opts))}
}

// Count counts records per key. Tombstones are skipped and null keys
// dropped, each counted (DropSkipped, DropNullKey).
func (g GroupedStream[K, V]) Count(opts ...StoreOption) Table[K, int64] {
	return aggregateKV(g, "COUNT", func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64(), opts)
}

// Reduce combines each key's values with f, the first value being the
// initial aggregate. It needs the stream's value serde for its store.
func (g GroupedStream[K, V]) Reduce(f func(agg, v V) V, opts ...StoreOption) Table[K, V] {
	return aggregateKV(g, "REDUCE", nil, func(_ K, v V, agg V) V { return f(agg, v) }, g.s.vs, opts)
}

// Aggregate folds each key's records into an aggregate, starting from
// init(). The output timestamp of each update is the maximum timestamp of
// the records aggregated so far, as in Kafka Streams.
func (g GroupedStream[K, V]) Aggregate[VA any](init func() VA, add func(key K, value V, agg VA) VA, aggSerde serde.Serde[VA], opts ...StoreOption) Table[K, VA] {
	return aggregateKV(g, "AGGREGATE", zeroInit(init), add, aggSerde, opts)
}

// aggregateKV adds a key-value aggregation. A nil init means reduce: the
// first value is the aggregate.
func aggregateKV[K, V, VA any](g GroupedStream[K, V], op string, init func() VA, add func(K, V, VA) VA, aggSerde serde.Serde[VA], opts []StoreOption) Table[K, VA] {
	return aggregateByKey(g.s, op, aggSerde, opts, func(k K, v V, old VA, found bool) (VA, bool) {
		return fold(init, add, k, v, old, found), true
	})
}

// aggregateByKey adds the node and store of an aggregation per key, for
// grouped streams and grouped tables alike: step computes a record's new
// aggregate from its key's old one (found=false: none yet), which is stored
// and forwarded with the later of the record's and the old aggregate's
// timestamps, as in Kafka Streams. A null aggregate (a nil pointer,
// interface, slice or map), or none (step's ok false), deletes the key's row
// and forwards a delete, as Kafka Streams' put of a null does; the next
// record of that key finds no aggregate and starts anew. Records with a null key are dropped
// (DropNullKey) and tombstones skipped (DropSkipped), as Kafka Streams'
// KStreamAggregate and KStreamReduce do; a grouped table's deltas are never
// tombstones (their encoding is never empty) and never have null keys.
func aggregateByKey[K, V, VA any](s Stream[K, V], op string, aggSerde serde.Serde[VA], opts []StoreOption, step func(k K, v V, old VA, found bool) (agg VA, ok bool)) Table[K, VA] {
	cfg := tableConfig(newOpConfig(opts))
	cfg.cacheAllowed = true
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	name, ttl := s.b.addTableStore(n, cfg)
	requireAggSerdes(s.b, n.name, name, s.ks, aggSerde)
	null := keyNull[VA]()
	n.impl = opFunc[K, V, K, change[VA]](func(env *opEnv, next forwarder[K, change[VA]]) (receiver[K, V], error) {
		kv, err := tsKV(env, name, s.ks, aggSerde)
		if err != nil {
			return nil, err
		}
		kv.ttl = ttl.ms
		next, cache := withRecordCache(env, cfg, cacheKeyOf(s.ks, env.node), next)
		exp, err := newExpiry(env, kv, ttl, next)
		if err != nil {
			return nil, err
		}
		rf := receiverFunc[K, V](func(r Record[K, V]) error {
			cut := int64(math.MinInt64)
			if exp != nil {
				var err error
				if cut, err = exp.advance(r.Timestamp); err != nil {
					return err
				}
			}
			if dropNullKey(env, &r) {
				return nil
			}
			if r.Tombstone {
				env.Dropped(env.node, DropSkipped)
				return nil
			}
			old, oldTS, stored, err := kv.get(r.Key)
			if err != nil {
				return err
			}
			// A null row (written before null aggregates were deleted)
			// is no aggregate.
			found := stored && !isNull(null, old)
			agg, ok := step(r.Key, r.Value, old, found)
			ok = ok && !isNull(null, agg)
			ts := r.Timestamp
			if found && oldTS > ts {
				ts = oldTS
			}
			if exp != nil && exp.late(ts, cut) {
				return nil
			}
			switch {
			case ok:
				err = kv.put(r.Key, ts, agg)
			case stored:
				err = kv.del(r.Key)
			}
			if err != nil {
				return err
			}
			if exp != nil {
				if err := exp.moved(r.Key, oldTS, stored, ts, ok); err != nil {
					return err
				}
			}
			return next.forward(Record[K, change[VA]]{Key: r.Key, Timestamp: ts, Headers: r.Headers,
				Value: change[VA]{newV: agg, hasNew: ok, oldV: old, hasOld: found}})
		})
		if cache != nil {
			return cachedReceiver[K, V]{rf, cache}, nil
		}
		return rf, nil
	})
	return Table[K, VA]{b: s.b, n: n, ks: s.ks, vs: aggSerde, store: name, src: &storeGetters[K, VA]{name: name, ks: s.ks, vs: aggSerde, ttl: ttl.ms}}
}

// tsStore is a typed view of a timestamped key-value store, reusing its
// buffers (one per task instance).
type tsStore[K, V any] struct {
	name string
	node string
	kv   interface {
		Get([]byte) ([]byte, bool, error)
		Put(k, v []byte) error
		Delete([]byte) error
	}
	ks         serde.Serde[K]
	vs         serde.Serde[V]
	kbuf, vbuf []byte
	// ttl is the store's WithTTL in ms (0: none): get hides rows older
	// than the task's stream time − ttl, swept or not (ttl.go).
	ttl int64
	env *opEnv
}

func tsKV[K, V any](env *opEnv, name string, ks serde.Serde[K], vs serde.Serde[V]) (*tsStore[K, V], error) {
	kv, err := env.keyValue(name)
	if err != nil {
		return nil, err
	}
	return &tsStore[K, V]{name: name, node: env.node, kv: kv, ks: ks, vs: vs, env: env}, nil
}

func (s *tsStore[K, V]) key(k K) ([]byte, error) {
	b, err := s.ks.Encode(s.kbuf[:0], k)
	if err != nil {
		return nil, fmt.Errorf("operator %q: store %q: encode key: %w", s.node, s.name, err)
	}
	s.kbuf = b
	return storeKey(b), nil
}

func (s *tsStore[K, V]) get(k K) (v V, ts int64, found bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return v, 0, false, err
	}
	raw, found, err := s.kv.Get(kb)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("operator %q: store %q: get: %w", s.node, s.name, err)
		}
		return v, 0, false, err
	}
	ts, vb, err := DecodeTimestamped(raw)
	if err == nil && s.ttl > 0 && ts < s.env.StreamTime()-s.ttl {
		return v, 0, false, nil
	}
	if err == nil {
		v, err = s.vs.Decode(vb)
	}
	if err != nil {
		return v, 0, false, fmt.Errorf("operator %q: store %q: decode value: %w", s.node, s.name, err)
	}
	return v, ts, true, nil
}

func (s *tsStore[K, V]) put(k K, ts int64, v V) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	if s.vbuf, err = appendValueTS(s.vbuf, s.vs, ts, v); err != nil {
		return fmt.Errorf("operator %q: store %q: encode value: %w", s.node, s.name, err)
	}
	if err := s.kv.Put(kb, s.vbuf); err != nil {
		return fmt.Errorf("operator %q: store %q: put: %w", s.node, s.name, err)
	}
	return nil
}

func (s *tsStore[K, V]) del(k K) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	if err := s.kv.Delete(kb); err != nil {
		return fmt.Errorf("operator %q: store %q: delete: %w", s.node, s.name, err)
	}
	return nil
}
