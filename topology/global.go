package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// GlobalTable is a table of which every instance of the application holds
// all partitions (Kafka Streams' GlobalKTable): reference data such as the
// merchant or tenant table, or a product catalog, that streams of any key
// and any partition count look up without repartitioning.
//
//	merchants := b.GlobalTable("merchants", serde.String(), merchantSerde, topology.Named("merchants"))
//	enriched := payments.JoinGlobal(merchants,
//		func(_ string, p Payment) string { return p.MerchantID },
//		func(_ string, p Payment, m Merchant) Enriched { return Enriched{p, m.Name} })
//
// The global store is fed directly from its source topic, which is its
// changelog: there is no "<app>-<store>-changelog" topic, and the
// application never writes the store. The runtime reads the topic
// read_committed (aborted writes never appear), each record is the new
// value of its key (kept with the record's timestamp), a tombstone deletes
// the key, and records with a null key are ignored. On start every
// instance brings its copy up to the topic's last stable offsets, all
// partitions, before any task processes a record; from then on a global
// goroutine of the instance keeps it current, independently of the tasks.
// Each instance records how far it has read (per partition) next to the
// store's data, so a restart reads only the tail; missing or unreadable
// local state means a full reload from the topic's start.
//
// Because the global store is not part of any task, its updates are not
// synchronized with stream time: a join reads whatever value the store
// holds when the stream record is processed (see JoinGlobal). Keep the
// topic compacted: its retention is the store's.
//
// Options: Named names the store (and Describe's entry); name it in
// production (RequireNamedState), since the local state directory
// <stateDir>/global/<store> is named after it. WithoutChangelog and
// WithChangelogConfig do not apply (the topic is the changelog) and fail
// Build.
type GlobalTable[K, V any] struct {
	b    *Builder
	info *GlobalStoreInfo
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// GlobalStoreInfo describes a global store: a key-value store that every
// instance fills from all partitions of Topic, outside any task.
type GlobalStoreInfo struct {
	// Spec is a key-value spec; Logged is false because Topic itself is
	// the store's changelog.
	Spec store.Spec
	// Topic is the source topic, which no task consumes.
	Topic string
	// Timestamped is always true: values are stored as EncodeTimestamped
	// of the record's timestamp and value bytes, as table stores are.
	Timestamped bool
	// Nodes are the operators that read the store (the global joins).
	Nodes []string
	// Check decodes a record of Topic with the table's serdes (a nil
	// value is a tombstone), so the runtime refuses an undecodable record
	// before it is stored rather than fail every lookup of its key. Its
	// error wraps ErrDeserialize, unless the serde could not judge the
	// record (serde.ErrRegistry).
	Check func(key, value []byte) error
	// Nulls says whether the table's serdes read a record's key or value
	// as null (serde.Nuller: JSON's null), nil when neither has a null of
	// its own. Such a key is ignored as a null Kafka key is, and such a
	// value deletes, as a tombstone does.
	Nulls func(key, value []byte) (nullKey, tombstone bool)
}

// GlobalStoreDescription describes a global store in Describe's output.
type GlobalStoreDescription struct {
	Name  string
	Topic string
	// ReadBy are the operators that look the store up.
	ReadBy []string
}

// GlobalTable reads topic into a global store. See the GlobalTable type
// for its semantics.
func (b *Builder) GlobalTable[K, V any](topic string, keys serde.Serde[K], values serde.Serde[V], opts ...StoreOption) GlobalTable[K, V] {
	cfg := newOpConfig(opts)
	name := cfg.name
	if name == "" {
		name = topic + "-GLOBAL-STORE"
		if b.strict {
			b.fail(errorf(name, "%w: global store has a generated name; name it with Named (RequireNamedState)", ErrInvalidTopology))
		}
	}
	info := &GlobalStoreInfo{Spec: store.Spec{Name: name, Kind: store.KindKeyValue}, Topic: topic, Timestamped: true,
		Check: globalCheck(keys, values), Nulls: globalNulls(keys, values)}
	switch {
	case topic == "":
		b.fail(errorf(name, "%w: global table without a topic", ErrInvalidTopology))
	case keys == nil:
		b.fail(errorf(name, "%w: key serde of global table topic %q", ErrMissingSerde, topic))
	case values == nil:
		b.fail(errorf(name, "%w: value serde of global table topic %q", ErrMissingSerde, topic))
	case cfg.notLogged || cfg.changelogConf != nil:
		b.fail(errorf(name, "%w: a global table's topic is its changelog: WithoutChangelog and WithChangelogConfig do not apply", ErrInvalidTopology))
	}
	if _, dup := b.stores[name]; dup || b.globalStore(name) != nil {
		b.fail(errorf(name, "%w: store %q already exists", ErrDuplicateName, name))
	}
	for _, g := range b.globals {
		if g.Topic == topic {
			b.fail(errorf(name, "%w: topic %q is already read by global store %q", ErrDuplicateName, topic, g.Spec.Name))
		}
	}
	b.globals = append(b.globals, info)
	return GlobalTable[K, V]{b: b, info: info, ks: keys, vs: values}
}

func globalNulls[K, V any](keys serde.Serde[K], values serde.Serde[V]) func(key, value []byte) (bool, bool) {
	kn, _ := keys.(serde.Nuller)
	vn, _ := values.(serde.Nuller)
	if kn == nil && vn == nil {
		return nil
	}
	return func(key, value []byte) (bool, bool) {
		return kn != nil && kn.IsNull(key), vn != nil && value != nil && vn.IsNull(value)
	}
}

func globalCheck[K, V any](keys serde.Serde[K], values serde.Serde[V]) func(key, value []byte) error {
	if keys == nil || values == nil {
		return nil // Build fails
	}
	wrap := func(what string, err error) error {
		if errors.Is(err, serde.ErrRegistry) {
			return fmt.Errorf("%s not decoded yet: %w", what, err)
		}
		return fmt.Errorf("%w %s: %w", ErrDeserialize, what, err)
	}
	return func(key, value []byte) error {
		if _, err := keys.Decode(key); err != nil {
			return wrap("key", err)
		}
		if value == nil {
			return nil
		}
		if _, err := values.Decode(value); err != nil {
			return wrap("value", err)
		}
		return nil
	}
}

// StoreName is the global store's name.
func (g GlobalTable[K, V]) StoreName() string { return g.info.Spec.Name }

func (b *Builder) globalStore(name string) *GlobalStoreInfo {
	for _, g := range b.globals {
		if g.Spec.Name == name {
			return g
		}
	}
	return nil
}

// validateGlobals fails a topology whose global topics are also read by a
// task (a topic is either partitioned among tasks or global, as in Kafka
// Streams) or whose global store names clash with task stores.
func (b *Builder) validateGlobals() {
	for _, g := range b.globals {
		if _, dup := b.stores[g.Spec.Name]; dup {
			b.fail(errorf(g.Spec.Name, "%w: store %q already exists", ErrDuplicateName, g.Spec.Name))
		}
		for _, n := range b.nodes {
			if n.kind == KindSource && slices.Contains(n.topics, g.Topic) {
				b.fail(errorf(n.name, "%w: topic %q is the source of global store %q and cannot also be read by a task", ErrInvalidTopology, g.Topic, g.Spec.Name))
			}
		}
	}
}

// JoinGlobal looks each stream record up in the global table g under
// keyOf(key, value): records whose mapped key is in g yield
// joiner(key, value, globalValue), with the stream record's key, timestamp
// and headers. As the global store holds every partition, the stream is
// never repartitioned and need not be co-partitioned with g's topic (any
// partition counts work); a stream whose key was changed stays as it is.
//
// The lookup reads the global store's current value, not the value as of
// the record's timestamp: the store is updated by the instance's global
// goroutine as its topic is read, independently of stream time (Kafka
// Streams does the same). Only on start is the order fixed: the store has
// caught up with its topic before the first stream record is processed.
// Reprocessing after a failure may therefore join a record with a newer
// global value than its first attempt did; exactly-once still holds for
// the outputs that were committed.
//
// Updates of g produce no output. Stream tombstones are skipped
// (DropSkipped). The stream record's own key may be null (keyOf usually
// reads the value); a mapped key that is null (a nil pointer, interface,
// slice or map) drops the record (DropNullKey), and a mapped key absent
// from g drops it silently, as JoinTable does.
func (s Stream[K, V]) JoinGlobal[KG, VG, VR any](g GlobalTable[KG, VG], keyOf func(key K, value V) KG, joiner func(key K, value V, global VG) VR, opts ...Option) Stream[K, VR] {
	return joinGlobal(s, g, false, keyOf, func(k K, v V, gv VG, _ bool) VR { return joiner(k, v, gv) }, opts)
}

// LeftJoinGlobal is JoinGlobal that also emits records whose mapped key is
// null or absent from g, as joiner(key, value, zero, false).
func (s Stream[K, V]) LeftJoinGlobal[KG, VG, VR any](g GlobalTable[KG, VG], keyOf func(key K, value V) KG, joiner func(key K, value V, global VG, found bool) VR, opts ...Option) Stream[K, VR] {
	return joinGlobal(s, g, true, keyOf, joiner, opts)
}

func joinGlobal[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], left bool, keyOf func(K, V) KG, joiner func(K, V, VG, bool) VR, opts []Option) Stream[K, VR] {
	cfg := newOpConfig(opts)
	op := "STREAM-GLOBAL-JOIN"
	if left {
		op = "STREAM-GLOBAL-LEFTJOIN"
	}
	storeName := g.info.Spec.Name
	null := keyNull[KG]()
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg,
		opFunc[K, V, K, VR](func(env *opEnv, next forwarder[K, VR]) (receiver[K, V], error) {
			gs, err := tsKV(env, storeName, g.ks, g.vs)
			if err != nil {
				return nil, fmt.Errorf("global store: %w", err)
			}
			return receiverFunc[K, V](func(r Record[K, V]) error {
				if r.Tombstone {
					env.Dropped(env.node, DropSkipped)
					return nil
				}
				out := Record[K, VR]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers, NullKey: r.NullKey}
				var gv VG
				var found bool
				if gk := keyOf(r.Key, r.Value); isNull(null, gk) {
					if !left {
						env.Dropped(env.node, DropNullKey)
						return nil
					}
				} else if gv, _, found, err = gs.get(gk); err != nil {
					return errorf(env.node, "look up global table: %w", err)
				}
				if !found && !left {
					return nil
				}
				out.Value = joiner(r.Key, r.Value, gv, found)
				return next.forward(out)
			}), nil
		}))
	// The join needs no key of its own: null stream keys are the mapped
	// key's business, so a repartition upstream keeps them.
	n.nullKeyRelaxed = true
	if s.b.checkSame(n, g.b) && !slices.Contains(g.info.Nodes, n.name) {
		g.info.Nodes = append(g.info.Nodes, n.name)
	}
	return Stream[K, VR]{b: s.b, n: n, ks: s.ks, vs: serdeAs[VR](s.vs), rekeyed: s.rekeyed}
}

// GlobalStores describes the global stores in declaration order.
func (t *Topology) GlobalStores() []GlobalStoreInfo {
	out := make([]GlobalStoreInfo, 0, len(t.globals))
	for _, g := range t.globals {
		c := *g
		c.Nodes = slices.Clone(g.Nodes)
		out = append(out, c)
	}
	return out
}

// GlobalStore describes the named global store.
func (t *Topology) GlobalStore(name string) (GlobalStoreInfo, bool) {
	for _, g := range t.GlobalStores() {
		if g.Spec.Name == name {
			return g, true
		}
	}
	return GlobalStoreInfo{}, false
}

// GlobalTopics are the source topics of the global stores, sorted. They
// are not among SourceTopics: no task, and no consumer group member,
// reads them.
func (t *Topology) GlobalTopics() []string {
	out := make([]string, 0, len(t.globals))
	for _, g := range t.globals {
		out = append(out, g.Topic)
	}
	slices.Sort(out)
	return out
}

// describeGlobals renders the global stores after the sub-topologies, in
// the spirit of Kafka Streams' "Sub-topology: n for global store (will not
// generate tasks)".
func (d Description) describeGlobals() string {
	var s string
	for _, g := range d.GlobalStores {
		s += fmt.Sprintf("   Global store: %s (topic: %s, will not generate tasks)\n", g.Name, g.Topic)
		if len(g.ReadBy) > 0 {
			s += fmt.Sprintf("      --> %s\n", strings.Join(g.ReadBy, ", "))
		}
	}
	if s != "" {
		s += "\n"
	}
	return s
}

// dotGlobals renders the global stores for DOT: each outside every
// sub-topology, fed by its topic (a bold edge: the topic is its
// changelog) and joined to the operators that read it by dashed edges.
func (d Description) dotGlobals() string {
	var b strings.Builder
	for _, g := range d.GlobalStores {
		fmt.Fprintf(&b, "\t%s [shape=box, style=\"rounded,filled\", fillcolor=\"#dbeafe\", label=%s];\n",
			dotID("topic", g.Topic), dotLabel(g.Topic, "(global topic)"))
		fmt.Fprintf(&b, "\t%s [shape=cylinder, style=filled, fillcolor=\"#fef3c7\", label=%s];\n",
			dotID("store", g.Name), dotLabel(g.Name, "(global key-value store)"))
		fmt.Fprintf(&b, "\t%s -> %s [style=bold];\n", dotID("topic", g.Topic), dotID("store", g.Name))
		for _, n := range g.ReadBy {
			fmt.Fprintf(&b, "\t%s -> %s [dir=none, style=dashed];\n", dotID("node", n), dotID("store", g.Name))
		}
	}
	return b.String()
}
