package topology

import (
	"math"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

func kvSpec() store.Spec { return store.Spec{Kind: store.KindKeyValue} }

// change is what tables forward internally: the new value of a key and the
// value it replaces. hasNew=false is a delete.
type change[V any] struct {
	newV, oldV     V
	hasNew, hasOld bool
}

// Table is a changelog stream viewed as the latest value per key (Kafka
// Streams' KTable). Tables from topics and from aggregations are
// materialized in a store; Filter, MapValues and joins of tables are
// computed on read from the stores upstream of them.
type Table[K, V any] struct {
	b     *Builder
	n     *node
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	store string // "" when not materialized
	src   getterSource[K, V]
}

// getter reads a table's current value of a key inside a task.
type getter[K, V any] interface {
	get(k K) (v V, ts int64, found bool, err error)
}

// getterSource makes a table's getter for a task and says which stores it
// reads, so operators that look tables up join their sub-topology.
type getterSource[K, V any] interface {
	newGetter(env *opEnv) (getter[K, V], error)
	storeNames() []string
}

type storeGetters[K, V any] struct {
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
	ttl  int64 // WithTTL in ms, 0 without: getters hide expired rows
}

func (s *storeGetters[K, V]) newGetter(env *opEnv) (getter[K, V], error) {
	kv, err := tsKV(env, s.name, s.ks, s.vs)
	if err != nil {
		return nil, err
	}
	kv.ttl = s.ttl
	return kv, nil
}
func (s *storeGetters[K, V]) storeNames() []string { return []string{s.name} }

type funcGetters[K, V any] struct {
	stores []string
	mk     func(env *opEnv) (getter[K, V], error)
}

func (f *funcGetters[K, V]) newGetter(env *opEnv) (getter[K, V], error) { return f.mk(env) }
func (f *funcGetters[K, V]) storeNames() []string                       { return f.stores }

type getterFunc[K, V any] func(k K) (V, int64, bool, error)

func (f getterFunc[K, V]) get(k K) (V, int64, bool, error) { return f(k) }

// Table reads topic as a table: each record is the new value of its key, a
// null value deletes it. Records with a null key are dropped (DropNullKey),
// as Kafka Streams' KTableSource does; an empty key is a key like any other.
// The table is materialized in a store named by Named (else generated),
// logged to "<app>-<store>-changelog".
func (b *Builder) Table[K, V any](topic string, keys serde.Serde[K], values serde.Serde[V], opts ...StoreOption) Table[K, V] {
	src := newSource(b, []string{topic}, keys, values, &opConfig{}, false)
	return Stream[K, V]{b: b, n: src, ks: keys, vs: values}.toTable("TABLE", newOpConfig(opts))
}

// ToTable materializes the stream as a table: each record is the new value
// of its key and a tombstone deletes it; records with a null key are dropped
// (DropNullKey). A stream whose key may have changed (SelectKey, Map,
// FlatMap, Process) is first repartitioned by its key, through
// "<app>-<name>-repartition", as Kafka Streams does: a key's rows must be
// in the task that owns the key's partition, where joins and queries look
// for them.
func (s Stream[K, V]) ToTable(opts ...StoreOption) Table[K, V] {
	cfg := newOpConfig(opts)
	if s.rekeyed {
		rc := &opConfig{}
		if cfg.name != "" {
			rc.name, rc.topicBase = cfg.name+"-repartition", cfg.name
		}
		s = s.repartition("REPARTITION", rc)
	}
	return s.toTable("TOTABLE", cfg)
}

func (s Stream[K, V]) toTable(op string, cfg *opConfig) Table[K, V] {
	if cfg.versioned {
		// A versioned table expires history by its own retention;
		// WithTTL beside Versioned is a Build error (checkTTL).
		return s.toVersionedTable(op, cfg)
	}
	cfg = tableConfig(cfg)
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	name, ttl := s.b.addTableStore(n, cfg)
	if s.ks == nil {
		s.b.fail(errorf(n.name, "%w: key serde for store %q", ErrMissingSerde, name))
	}
	if s.vs == nil {
		s.b.fail(errorf(n.name, "%w: value serde for store %q", ErrMissingSerde, name))
	}
	ks, vs := s.ks, s.vs
	n.impl = opFunc[K, V, K, change[V]](func(env *opEnv, next forwarder[K, change[V]]) (receiver[K, V], error) {
		kv, err := tsKV(env, name, ks, vs)
		if err != nil {
			return nil, err
		}
		kv.ttl = ttl.ms
		exp, err := newExpiry(env, kv, ttl, next)
		if err != nil {
			return nil, err
		}
		return receiverFunc[K, V](func(r Record[K, V]) error {
			cut := int64(math.MinInt64)
			if exp != nil {
				var err error
				if cut, err = exp.advance(r.Timestamp); err != nil {
					return err
				}
			}
			if dropNullKey(env, &r) || exp != nil && exp.late(r.Timestamp, cut) {
				return nil
			}
			old, oldTS, found, err := kv.get(r.Key)
			if err != nil {
				return err
			}
			c := change[V]{oldV: old, hasOld: found}
			if r.Tombstone {
				// A tombstone for a key the table does not hold
				// deletes nothing but still goes downstream, as Kafka
				// Streams' KTableSource forwards Change(null, null):
				// its toStream() writes the tombstone on.
				if found {
					err = kv.del(r.Key)
				}
			} else {
				c.newV, c.hasNew = r.Value, true
				err = kv.put(r.Key, r.Timestamp, r.Value)
			}
			if err != nil {
				return err
			}
			if exp != nil {
				if err := exp.moved(r.Key, oldTS, found, r.Timestamp, c.hasNew); err != nil {
					return err
				}
			}
			return next.forward(Record[K, change[V]]{Key: r.Key, Value: c, Timestamp: r.Timestamp, Headers: r.Headers})
		}), nil
	})
	return Table[K, V]{b: s.b, n: n, ks: ks, vs: vs, store: name, src: &storeGetters[K, V]{name: name, ks: ks, vs: vs, ttl: ttl.ms}}
}

// Name is the operator producing the table.
func (t Table[K, V]) Name() string { return t.n.name }

// StoreName is the store materializing the table, "" when it is computed on
// read (Filter, MapValues, joins).
func (t Table[K, V]) StoreName() string { return t.store }

// WithSerdes sets the serdes of the table's keys and values.
func (t Table[K, V]) WithSerdes(keys serde.Serde[K], values serde.Serde[V]) Table[K, V] {
	if keys != nil {
		t.ks = keys
	}
	if values != nil {
		t.vs = values
	}
	return t
}

// ToStream turns the table's updates into a stream; deletes become
// tombstones.
func (t Table[K, V]) ToStream(opts ...Option) Stream[K, V] {
	n := t.b.addNode(KindProcessor, "TOSTREAM", []*node{t.n}, newOpConfig(opts),
		opFunc[K, change[V], K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, change[V]], error) {
			return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
				return next.forward(Record[K, V]{Key: r.Key, Value: r.Value.newV, Tombstone: !r.Value.hasNew, Timestamp: r.Timestamp, Headers: r.Headers})
			}), nil
		}))
	return Stream[K, V]{b: t.b, n: n, ks: t.ks, vs: t.vs}
}

// Filter keeps the keys whose value satisfies keep; a value that stops
// satisfying it becomes a delete downstream. An update that satisfies keep
// neither before nor after forwards nothing: Kafka Streams' filter does
// so only when downstream asks for old values, and otherwise forwards a
// tombstone for every rejected update, even of a key that never passed.
func (t Table[K, V]) Filter(keep func(K, V) bool, opts ...Option) Table[K, V] {
	n := t.b.addNode(KindProcessor, "TABLE-FILTER", []*node{t.n}, newOpConfig(opts),
		opFunc[K, change[V], K, change[V]](func(_ *opEnv, next forwarder[K, change[V]]) (receiver[K, change[V]], error) {
			return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
				c := r.Value
				c.hasNew = c.hasNew && keep(r.Key, c.newV)
				c.hasOld = c.hasOld && keep(r.Key, c.oldV)
				if !c.hasNew && !c.hasOld {
					return nil
				}
				r.Value = c
				return next.forward(r)
			}), nil
		}))
	up := t.src
	src := &funcGetters[K, V]{stores: up.storeNames(), mk: func(env *opEnv) (getter[K, V], error) {
		g, err := up.newGetter(env)
		if err != nil {
			return nil, err
		}
		return derivedGetter(g, func(k K, v V, ts int64, ok bool, err error) (V, int64, bool, error) {
			if err != nil || !ok || !keep(k, v) {
				var z V
				return z, 0, false, err
			}
			return v, ts, true, nil
		}), nil
	}}
	return Table[K, V]{b: t.b, n: n, ks: t.ks, vs: t.vs, src: src}
}

// MapValues maps each value; the result is computed on read, not stored.
func (t Table[K, V]) MapValues[V2 any](f func(K, V) V2, opts ...Option) Table[K, V2] {
	n := t.b.addNode(KindProcessor, "TABLE-MAPVALUES", []*node{t.n}, newOpConfig(opts),
		opFunc[K, change[V], K, change[V2]](func(_ *opEnv, next forwarder[K, change[V2]]) (receiver[K, change[V]], error) {
			return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
				c := change[V2]{hasNew: r.Value.hasNew, hasOld: r.Value.hasOld}
				if c.hasNew {
					c.newV = f(r.Key, r.Value.newV)
				}
				if c.hasOld {
					c.oldV = f(r.Key, r.Value.oldV)
				}
				return next.forward(Record[K, change[V2]]{Key: r.Key, Value: c, Timestamp: r.Timestamp, Headers: r.Headers})
			}), nil
		}))
	up := t.src
	src := &funcGetters[K, V2]{stores: up.storeNames(), mk: func(env *opEnv) (getter[K, V2], error) {
		g, err := up.newGetter(env)
		if err != nil {
			return nil, err
		}
		return derivedGetter(g, func(k K, v V, ts int64, ok bool, err error) (V2, int64, bool, error) {
			if err != nil || !ok {
				var z V2
				return z, 0, false, err
			}
			return f(k, v), ts, true, nil
		}), nil
	}}
	return Table[K, V2]{b: t.b, n: n, ks: t.ks, vs: serdeAs[V2](t.vs), src: src}
}
