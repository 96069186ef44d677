package topology

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Versioned makes the table of Builder.Table or Stream.ToTable keep every
// version of each key for history of stream time, and more, instead of
// only the latest value (Kafka Streams' versioned key-value stores,
// KIP-889). Its purpose is the as-of stream-table join (KIP-914): a
// JoinTable or LeftJoinTable of a versioned table looks the stream record
// up as of the record's timestamp, so enriching a cart event with the
// product price gives the price that was valid when the event happened,
// whatever order the price updates and the events were processed in.
//
//	prices := b.Table("prices", serde.String(), serde.Int64(),
//		topology.Named("prices"), topology.Versioned(24*time.Hour))
//	carts.JoinTable(prices, func(sku string, c Cart, price int64) Line { ... })
//
// Stream time here is the table's: the largest timestamp of its updates
// (per task), kept in the store so a restore resumes it. With cutoff =
// stream time − history:
//
//   - A version that stopped being valid (a newer one took over) at or
//     before the cutoff is deleted, a tombstone in the changelog. The
//     newest version at or before the cutoff is kept while it is the
//     latest: the table never forgets a key's current value.
//   - Lookups as of a time before the cutoff find only a key's latest
//     version, when it is a value valid then (its timestamp at or before
//     the lookup's): a stream record older than the cutoff joins the
//     latest value if that was already valid at the record's time, and
//     no table value otherwise (LeftJoinTable emits it with found=false),
//     as Kafka Streams' versioned store answers.
//   - An update older than the cutoff is dropped (counted as DropLate).
//   - An update older than its key's latest version (out of order, within
//     history) is stored as history, so as-of lookups see it, but is not
//     forwarded downstream: what ToStream, table-table joins, GroupBy and
//     the other table operators see of a versioned table is its sequence
//     of latest values. Kafka Streams' table-table joins and groupBy skip
//     such updates too, but its toStream() writes them (KTableSource
//     forwards them marked not latest): tidemark's ToStream does not. An
//     update with the same timestamp as the latest replaces it and is
//     forwarded.
//   - A delete (a tombstone) is a version: lookups as of its time or later
//     find nothing, earlier ones still find the value before it.
//
// Operators that read the table by key (table-table joins, Filter and
// MapValues computed on read) read its latest value. Filter and MapValues
// of a versioned table stay versioned for JoinTable: they are computed on
// read from the version found. The result of a table-table join or an
// aggregation is not versioned. A join emits when the stream record is
// processed: a table update processed later, even one older than the
// record, does not change a join result already emitted.
//
// The store is an ordinary key-value store in the layout of
// store.VersionedKeyValue, logged to "<app>-<name>-changelog" (compacted;
// expired versions are deleted with tombstones), so exactly-once
// processing and restore hold as for any table. Only Builder.Table and
// Stream.ToTable accept Versioned; Build fails for other operators and for
// a negative history. History 0 keeps only the latest versions: as-of
// lookups older than the table's stream time find only a latest version
// already valid then, and updates older than it are dropped.
func Versioned(history time.Duration) StoreOption {
	return storeOpt{slidingOpt{windowOpt{func(c *opConfig) { c.versioned, c.history = true, history }}}}
}

func (s Stream[K, V]) toVersionedTable(op string, cfg *opConfig) Table[K, V] {
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	if cfg.history < 0 {
		s.b.fail(errorf(n.name, "%w: versioned history %v is negative", ErrInvalidWindow, cfg.history))
	}
	storeCfg := *cfg
	storeCfg.versioned = false
	name := s.b.addStore(n, &storeCfg, "", kvSpec(), false)
	if info, ok := s.b.stores[name]; ok {
		info.Versioned, info.History = true, cfg.history
	}
	if s.ks == nil {
		s.b.fail(errorf(n.name, "%w: key serde for store %q", ErrMissingSerde, name))
	}
	if s.vs == nil {
		s.b.fail(errorf(n.name, "%w: value serde for store %q", ErrMissingSerde, name))
	}
	src := &versionedGetters[K, V]{name: name, history: cfg.history, t: Table[K, V]{ks: s.ks, vs: s.vs}}
	n.impl = opFunc[K, V, K, change[V]](func(env *opEnv, next forwarder[K, change[V]]) (receiver[K, V], error) {
		vs, err := src.open(env)
		if err != nil {
			return nil, err
		}
		return receiverFunc[K, V](func(r Record[K, V]) error {
			if dropNullKey(env, &r) {
				return nil
			}
			return vs.update(env, r, next)
		}), nil
	})
	return Table[K, V]{b: s.b, n: n, ks: s.ks, vs: s.vs, store: name, src: src}
}

// versionedGetters is the getterSource of a versioned table: its getters
// answer the latest value and, for JoinTable, the value as of a time.
type versionedGetters[K, V any] struct {
	name    string
	history time.Duration
	t       Table[K, V] // the serdes
}

func (s *versionedGetters[K, V]) storeNames() []string { return []string{s.name} }

func (s *versionedGetters[K, V]) newGetter(env *opEnv) (getter[K, V], error) { return s.open(env) }

// open returns the task's typed view of the store. Every node of the task
// shares one, since the store wrapper caches the observed stream time: a
// second wrapper would answer with a stale cutoff.
func (s *versionedGetters[K, V]) open(env *opEnv) (*versionedTable[K, V], error) {
	kv, err := env.keyValue(s.name)
	if err != nil {
		return nil, err
	}
	type opened struct {
		vs  *store.VersionedKeyValue
		err error
	}
	o := env.sharedValue("versioned/"+s.name, func() any {
		vs, err := store.NewVersioned(kv, s.history)
		return opened{vs, err}
	}).(opened)
	if o.err != nil {
		return nil, errorf(env.node, "%w", o.err)
	}
	return &versionedTable[K, V]{node: env.node, vs: o.vs, typed: store.NewTypedVersioned(o.vs, s.t.ks, s.t.vs)}, nil
}

// versionedTable is one node's typed view of a versioned table's store.
type versionedTable[K, V any] struct {
	node  string
	vs    *store.VersionedKeyValue
	typed *store.TypedVersioned[K, V]
}

func (t *versionedTable[K, V]) errorf(format string, args ...any) error {
	return errorf(t.node, "store %q: "+format, append([]any{t.vs.Name()}, args...)...)
}

func (t *versionedTable[K, V]) get(k K) (V, int64, bool, error) {
	v, ts, found, err := t.typed.Get(k)
	if err != nil {
		err = t.errorf("get: %w", err)
	}
	return v, ts, found, err
}

// getAsOf makes versionedTable an asOfGetter.
func (t *versionedTable[K, V]) getAsOf(k K, asOf int64) (V, int64, bool, error) {
	v, ts, found, err := t.typed.GetAsOf(k, asOf)
	if err != nil {
		err = t.errorf("get as of %d: %w", asOf, err)
	}
	return v, ts, found, err
}

// update applies a table update r (see Versioned for what is forwarded).
func (t *versionedTable[K, V]) update(env *opEnv, r Record[K, V], next forwarder[K, change[V]]) error {
	cut, err := t.vs.Cutoff()
	if err != nil {
		return t.errorf("%w", err)
	}
	if r.Timestamp < cut {
		env.Dropped(env.node, DropLate)
		return nil
	}
	latest, hasLatest, err := t.typed.LatestTimestamp(r.Key)
	if err != nil {
		return t.errorf("%w", err)
	}
	old, _, found, err := t.get(r.Key)
	if err != nil {
		return err
	}
	if r.Tombstone {
		err = t.typed.Delete(r.Key, r.Timestamp)
	} else {
		err = t.typed.Put(r.Key, r.Timestamp, r.Value)
	}
	if err != nil {
		return t.errorf("put: %w", err)
	}
	if hasLatest && r.Timestamp < latest {
		return nil // history only: the latest value did not change
	}
	// A tombstone for a key without a latest value goes downstream too,
	// as Kafka Streams' KTableSource forwards Change(null, null).
	c := change[V]{oldV: old, hasOld: found}
	if !r.Tombstone {
		c.newV, c.hasNew = r.Value, true
	}
	return next.forward(Record[K, change[V]]{Key: r.Key, Value: c, Timestamp: r.Timestamp, Headers: r.Headers})
}

// asOfGetter is a getter that can also answer the value of a key as of a
// time: the getters of versioned tables, and of Filter and MapValues
// computed on read from them. JoinTable uses it when the table's getter
// has it.
type asOfGetter[K, V any] interface {
	getter[K, V]
	getAsOf(k K, asOf int64) (v V, validFrom int64, found bool, err error)
}

// derivedGetter applies f to what up answers, latest or as of a time: the
// getter of a table computed on read (Filter, MapValues). It keeps up's
// as-of lookups when up has them, so such tables stay versioned.
func derivedGetter[K, V, V2 any](up getter[K, V], f func(k K, v V, ts int64, found bool, err error) (V2, int64, bool, error)) getter[K, V2] {
	g := getterFunc[K, V2](func(k K) (V2, int64, bool, error) {
		v, ts, found, err := up.get(k)
		return f(k, v, ts, found, err)
	})
	ag, ok := up.(asOfGetter[K, V])
	if !ok {
		return g
	}
	return derivedAsOf[K, V2]{getterFunc: g, asOf: func(k K, asOf int64) (V2, int64, bool, error) {
		v, ts, found, err := ag.getAsOf(k, asOf)
		return f(k, v, ts, found, err)
	}}
}

type derivedAsOf[K, V any] struct {
	getterFunc[K, V]
	asOf func(k K, asOf int64) (V, int64, bool, error)
}

func (d derivedAsOf[K, V]) getAsOf(k K, asOf int64) (V, int64, bool, error) { return d.asOf(k, asOf) }

// lookup is JoinTable's lookup of a stream record with timestamp ts: as of
// ts when the table is versioned, its latest value otherwise.
func lookup[K, V any](g getter[K, V], k K, ts int64) (V, bool, error) {
	var (
		v     V
		found bool
		err   error
	)
	if ag, ok := g.(asOfGetter[K, V]); ok {
		v, _, found, err = ag.getAsOf(k, ts)
	} else {
		v, _, found, err = g.get(k)
	}
	if err != nil {
		return v, false, fmt.Errorf("look up table: %w", err)
	}
	return v, found, nil
}
