package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
)

// GroupedTable is a table re-grouped by a new key, ready to aggregate
// (Kafka Streams' KGroupedTable). Unlike a grouped stream, its aggregations
// also subtract: when a row changes, its old value leaves the old group and
// its new value joins the new one.
type GroupedTable[K, V any] struct {
	s Stream[K, tableDelta[V]]
}

// tableDelta is a table row change on its way through the repartition
// topic: a value to add to its group, one to subtract from it, or, when a
// row changes and stays in its group, both (replace: subtract old, add v),
// which the aggregation applies as one update, as Kafka Streams does since
// 3.5 (KIP-904). Sent as two deltas, the subtraction alone would be
// forwarded as an update of its own, a wrong intermediate aggregate (a
// count dipping to 0) that downstream consumers see.
type tableDelta[V any] struct {
	v       V
	sub     bool
	replace bool
	old     V // replace only
}

type tableDeltaSerde[V any] struct{ vs serde.Serde[V] }

// Delta flags: the first byte of an encoded tableDelta.
const (
	deltaAdd     = 0 // then the value
	deltaSub     = 1 // then the value
	deltaReplace = 2 // then the old value's length (uvarint), the old value, the new value
)

func (s tableDeltaSerde[V]) Encode(dst []byte, d tableDelta[V]) ([]byte, error) {
	switch {
	case d.replace:
		dst = append(dst, deltaReplace)
		start := len(dst)
		old, err := s.vs.Encode(nil, d.old)
		if err != nil {
			return dst[:start-1], err
		}
		dst = binary.AppendUvarint(dst, uint64(len(old)))
		dst = append(dst, old...)
		return s.vs.Encode(dst, d.v)
	case d.sub:
		return s.vs.Encode(append(dst, deltaSub), d.v)
	default:
		return s.vs.Encode(append(dst, deltaAdd), d.v)
	}
}

func (s tableDeltaSerde[V]) Decode(b []byte) (tableDelta[V], error) {
	if len(b) < 1 {
		return tableDelta[V]{}, fmt.Errorf("%w: empty table delta", serde.ErrDecode)
	}
	switch b[0] {
	case deltaAdd, deltaSub:
		v, err := s.vs.Decode(b[1:])
		return tableDelta[V]{v: v, sub: b[0] == deltaSub}, err
	case deltaReplace:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || uint64(len(b)-1-k) < n {
			return tableDelta[V]{}, fmt.Errorf("%w: table delta: bad old value length", serde.ErrDecode)
		}
		rest := b[1+k:]
		old, err := s.vs.Decode(rest[:n])
		if err != nil {
			return tableDelta[V]{}, err
		}
		v, err := s.vs.Decode(rest[n:])
		return tableDelta[V]{v: v, old: old, replace: true}, err
	default:
		return tableDelta[V]{}, fmt.Errorf("%w: table delta: unknown flag %d", serde.ErrDecode, b[0])
	}
}

// GroupBy re-keys the table's rows with f and repartitions them by the new
// key, through "<app>-<name>-repartition". keys and values serialize the
// new key and value for that topic. A row f maps to a null key (a nil
// pointer, interface, slice or map) joins no group: it is dropped and
// counted (DropNullKey), where Kafka Streams' KTableRepartitionMap skips it.
// So does a row f maps to a null value (a nil pointer, interface, slice or
// map V2), counted as DropSkipped: as in Kafka Streams, add and subtract
// never see a null and Count does not count the row.
// A WithPartitioner partitioner takes the new key and value, as f returns
// them: the row's old value for a subtraction, its new one otherwise; it
// must send a key's every change to one partition, so it should read the
// key only.
func (t Table[K, V]) GroupBy[K2, V2 any](f func(K, V) (K2, V2), keys serde.Serde[K2], values serde.Serde[V2], opts ...RepartitionOption) GroupedTable[K2, V2] {
	cfg := newOpConfig(opts)
	null, valueNull := keyNull[K2](), keyNull[V2]()
	partitioner := cfg.partitioner
	cfg.partitioner = nil // adapted to the repartition topic's records below
	n := t.b.addNode(KindProcessor, "TABLE-GROUPBY", []*node{t.n}, &opConfig{},
		opFunc[K, change[V], K2, tableDelta[V2]](func(env *opEnv, next forwarder[K2, tableDelta[V2]]) (receiver[K, change[V]], error) {
			send := func(r Record[K, change[V]], k2 K2, d tableDelta[V2]) error {
				if isNull(null, k2) {
					env.Dropped(env.node, DropNullKey)
					return nil
				}
				if isNull(valueNull, d.v) {
					env.Dropped(env.node, DropSkipped)
					return nil
				}
				return next.forward(Record[K2, tableDelta[V2]]{Key: k2, Value: d, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			var oldKey, newKey []byte
			return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
				if r.Value.hasOld && r.Value.hasNew && keys != nil {
					ok2, ov2 := f(r.Key, r.Value.oldV)
					nk2, nv2 := f(r.Key, r.Value.newV)
					if isNull(null, ok2) || isNull(null, nk2) || isNull(valueNull, ov2) || isNull(valueNull, nv2) {
						if err := send(r, ok2, tableDelta[V2]{v: ov2, sub: true}); err != nil {
							return err
						}
						return send(r, nk2, tableDelta[V2]{v: nv2})
					}
					var err error
					if oldKey, err = keys.Encode(oldKey[:0], ok2); err != nil {
						return errorf(env.node, "encode group key: %w", err)
					}
					if newKey, err = keys.Encode(newKey[:0], nk2); err != nil {
						return errorf(env.node, "encode group key: %w", err)
					}
					if bytes.Equal(oldKey, newKey) {
						// The row stays in its group: one change (KIP-904).
						return send(r, nk2, tableDelta[V2]{v: nv2, old: ov2, replace: true})
					}
					// Subtract first, as Kafka Streams does.
					if err := send(r, ok2, tableDelta[V2]{v: ov2, sub: true}); err != nil {
						return err
					}
					return send(r, nk2, tableDelta[V2]{v: nv2})
				}
				if r.Value.hasOld {
					k2, v2 := f(r.Key, r.Value.oldV)
					return send(r, k2, tableDelta[V2]{v: v2, sub: true})
				}
				if r.Value.hasNew {
					k2, v2 := f(r.Key, r.Value.newV)
					return send(r, k2, tableDelta[V2]{v: v2})
				}
				return nil
			}), nil
		}))
	var ds serde.Serde[tableDelta[V2]]
	if values != nil {
		ds = tableDeltaSerde[V2]{vs: values}
	}
	s := Stream[K2, tableDelta[V2]]{b: t.b, n: n, ks: keys, vs: ds}
	if values == nil {
		t.b.fail(errorf(n.name, "%w: value serde for the repartition topic", ErrMissingSerde))
	}
	if partitioner != nil {
		if f, ok := partitioner.(func(string, K2, V2, int32) int32); ok {
			cfg.partitioner = func(topic string, k K2, d tableDelta[V2], n int32) int32 { return f(topic, k, d.v, n) }
		} else {
			t.b.fail(errorf(n.name, "%w: partitioner %T does not take the new keys and values (%T)", ErrInvalidTopology, partitioner, KeyValue[K2, V2]{}))
		}
	}
	return GroupedTable[K2, V2]{s: s.repartition("REPARTITION", cfg)}
}

// Count counts the rows in each group.
func (g GroupedTable[K, V]) Count(opts ...StoreOption) Table[K, int64] {
	return aggregateTable(g, "TABLE-COUNT", func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 }, func(_ K, _ V, n int64) int64 { return n - 1 }, serde.Int64(), opts)
}

// Aggregate keeps one aggregate per group: add folds a row's new value in,
// subtract takes a row's old value out.
func (g GroupedTable[K, V]) Aggregate[VA any](init func() VA, add, subtract func(key K, value V, agg VA) VA, aggSerde serde.Serde[VA], opts ...StoreOption) Table[K, VA] {
	return aggregateTable(g, "TABLE-AGGREGATE", zeroInit(init), add, subtract, aggSerde, opts)
}

// aggregateTable applies a delta as Kafka Streams' KTableAggregate does: the
// old value is subtracted only from an aggregate the group has (a group
// without one, its row expired or deleted by a null aggregate, subtracts
// nothing); the new value is added to what remains, or to init() where
// nothing does. A delta that only subtracts from a group without an
// aggregate leaves none: the group's row stays absent and a delete goes
// downstream (Kafka Streams forwards Change(null, null)).
func aggregateTable[K, V, VA any](g GroupedTable[K, V], op string, init func() VA, add, subtract func(K, V, VA) VA, aggSerde serde.Serde[VA], opts []StoreOption) Table[K, VA] {
	null := keyNull[VA]()
	return aggregateByKey(g.s, op, aggSerde, opts, func(k K, d tableDelta[V], old VA, found bool) (VA, bool) {
		agg, ok := old, found
		if ok && (d.sub || d.replace) {
			oldV := d.v
			if d.replace {
				oldV = d.old
			}
			agg = subtract(k, oldV, agg)
			ok = !isNull(null, agg)
		}
		if d.sub {
			return agg, ok
		}
		if !ok {
			agg = init()
		}
		return add(k, d.v, agg), true
	})
}
