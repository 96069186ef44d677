package topology

import (
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

// tableDelta is one side of a table row change on its way through the
// repartition topic: a value to add to, or subtract from, its group.
type tableDelta[V any] struct {
	v   V
	sub bool
}

type tableDeltaSerde[V any] struct{ vs serde.Serde[V] }

// The encoding is a flag byte (0 add, 1 subtract) then the value.
func (s tableDeltaSerde[V]) Encode(dst []byte, d tableDelta[V]) ([]byte, error) {
	flag := byte(0)
	if d.sub {
		flag = 1
	}
	return s.vs.Encode(append(dst, flag), d.v)
}

func (s tableDeltaSerde[V]) Decode(b []byte) (tableDelta[V], error) {
	if len(b) < 1 {
		return tableDelta[V]{}, fmt.Errorf("%w: empty table delta", serde.ErrDecode)
	}
	v, err := s.vs.Decode(b[1:])
	return tableDelta[V]{v: v, sub: b[0] == 1}, err
}

// GroupBy re-keys the table's rows with f and repartitions them by the new
// key, through "<app>-<name>-repartition". keys and values serialize the
// new key and value for that topic. A row f maps to a null key (a nil
// pointer, interface, slice or map) joins no group: it is dropped and
// counted (DropNullKey), where Kafka Streams' KTableRepartitionMap skips it.
func (t Table[K, V]) GroupBy[K2, V2 any](f func(K, V) (K2, V2), keys serde.Serde[K2], values serde.Serde[V2], opts ...RepartitionOption) GroupedTable[K2, V2] {
	cfg := newOpConfig(opts)
	null := keyNull[K2]()
	n := t.b.addNode(KindProcessor, "TABLE-GROUPBY", []*node{t.n}, &opConfig{},
		opFunc[K, change[V], K2, tableDelta[V2]](func(env *opEnv, next forwarder[K2, tableDelta[V2]]) (receiver[K, change[V]], error) {
			send := func(r Record[K, change[V]], k2 K2, d tableDelta[V2]) error {
				if isNull(null, k2) {
					env.Dropped(env.node, DropNullKey)
					return nil
				}
				return next.forward(Record[K2, tableDelta[V2]]{Key: k2, Value: d, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
				// Subtract first, as Kafka Streams does, so a row that stays in
				// its group never counts twice.
				if r.Value.hasOld {
					k2, v2 := f(r.Key, r.Value.oldV)
					if err := send(r, k2, tableDelta[V2]{v: v2, sub: true}); err != nil {
						return err
					}
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

func aggregateTable[K, V, VA any](g GroupedTable[K, V], op string, init func() VA, add, subtract func(K, V, VA) VA, aggSerde serde.Serde[VA], opts []StoreOption) Table[K, VA] {
	return aggregateByKey(g.s, op, aggSerde, opts, func(k K, d tableDelta[V], old VA, found bool) VA {
		if !found {
			old = init()
		}
		if d.sub {
			return subtract(k, d.v, old)
		}
		return add(k, d.v, old)
	})
}
