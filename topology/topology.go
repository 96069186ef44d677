package topology

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Topology is a built, validated, immutable topology. It is safe to share
// between tasks and goroutines: each task instantiates its own processors.
type Topology struct {
	app      string
	nodes    []*node
	byName   map[string]*node
	stores   map[string]*StoreInfo
	storeSeq []string
	subs     []*SubTopology
	repart   []InternalTopic
	copart   []CopartitionGroup
	globals  []*GlobalStoreInfo
	lateness time.Duration
}

// SubTopology is a connected part of the graph: the unit a task runs. Parts
// are connected by repartition topics, which one sub-topology writes and
// another reads.
type SubTopology struct {
	ID int
	// SourceTopics are the topics the sub-topology consumes, user and
	// repartition topics alike, sorted.
	SourceTopics []string
	// RepartitionSources are the source topics that are repartition topics.
	RepartitionSources []string
	// SinkTopics are the topics it produces to (changelogs excluded), sorted.
	SinkTopics []string
	// Stores are the stores its tasks open, in declaration order.
	Stores []store.Spec
	nodes  []*node
}

// Build validates the topology and splits it into sub-topologies. It
// returns every problem found, each naming its operator; errors.Is matches
// the sentinels in errors.go.
func (b *Builder) Build() (*Topology, error) {
	if b.built {
		return nil, fmt.Errorf("%w: Build called twice", ErrInvalidTopology)
	}
	b.built = true
	b.validate()
	b.validateGlobals()
	if err := b.errors(); err != nil {
		return nil, fmt.Errorf("build topology %q: %w", b.app, err)
	}
	t := &Topology{
		app:      b.app,
		nodes:    b.nodes,
		byName:   b.names,
		stores:   b.stores,
		storeSeq: b.storeOrder,
		repart:   b.repart,
		globals:  b.globals,
		lateness: b.lateness,
	}
	t.splitSubTopologies()
	t.settleRepartitionNullKeys()
	for _, c := range b.copart {
		g := CopartitionGroup{Operator: c.operator}
		for _, in := range c.inputs {
			for _, topic := range upstreamTopics(in) {
				if !slices.Contains(g.Topics, topic) {
					g.Topics = append(g.Topics, topic)
				}
			}
		}
		sort.Strings(g.Topics)
		t.copart = append(t.copart, g)
	}
	if err := t.checkJoinPlacements(); err != nil {
		return nil, fmt.Errorf("build topology %q: %w", b.app, err)
	}
	return t, nil
}

func (b *Builder) validate() {
	if len(b.nodes) == 0 {
		b.fail(fmt.Errorf("%w: no sources", ErrInvalidTopology))
	}
	seen := map[string]string{}
	for _, n := range b.nodes {
		for _, s := range n.stores {
			if _, ok := b.stores[s]; !ok {
				b.fail(errorf(n.name, "%w: %q (add it with Builder.AddStore)", ErrUnknownStore, s))
			}
		}
		if n.kind != KindSource {
			continue
		}
		for _, topic := range n.topics {
			if prev, dup := seen[topic]; dup {
				b.fail(errorf(n.name, "%w: topic %q is already read by source %q", ErrDuplicateName, topic, prev))
			}
			seen[topic] = n.name
		}
	}
}

// upstreamTopics lists the source topics feeding n within its sub-topology.
func upstreamTopics(n *node) []string {
	var out []string
	seen := map[*node]bool{}
	var walk func(*node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.kind == KindSource {
			out = append(out, n.topics...)
		}
		for _, p := range n.parents {
			walk(p)
		}
	}
	walk(n)
	return out
}

// splitSubTopologies groups nodes connected by edges or by a shared store;
// ids follow the creation order of each group's first node.
func (t *Topology) splitSubTopologies() {
	parent := make([]int, len(t.nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra < rb {
			parent[rb] = ra
		} else if rb < ra {
			parent[ra] = rb
		}
	}
	storeOwner := map[string]int{}
	for _, n := range t.nodes {
		for _, p := range n.parents {
			union(n.seq, p.seq)
		}
		for _, s := range n.stores {
			if o, ok := storeOwner[s]; ok {
				union(n.seq, o)
			} else {
				storeOwner[s] = n.seq
			}
		}
	}
	ids := map[int]int{}
	for _, n := range t.nodes {
		root := find(n.seq)
		id, ok := ids[root]
		if !ok {
			id = len(t.subs)
			ids[root] = id
			t.subs = append(t.subs, &SubTopology{ID: id})
		}
		n.sub = id
		st := t.subs[id]
		st.nodes = append(st.nodes, n)
		switch n.kind {
		case KindSource:
			st.SourceTopics = append(st.SourceTopics, n.topics...)
			if n.internal {
				st.RepartitionSources = append(st.RepartitionSources, n.topics...)
			}
		case KindSink:
			if !slices.Contains(st.SinkTopics, n.topics[0]) {
				st.SinkTopics = append(st.SinkTopics, n.topics[0])
			}
		}
	}
	for _, st := range t.subs {
		sort.Strings(st.SourceTopics)
		sort.Strings(st.RepartitionSources)
		sort.Strings(st.SinkTopics)
		for _, name := range t.storeSeq {
			info := t.stores[name]
			for _, n := range st.nodes {
				if slices.Contains(n.stores, name) {
					st.Stores = append(st.Stores, info.Spec)
					break
				}
			}
		}
	}
}

// Application is the application id.
func (t *Topology) Application() string { return t.app }

// AllowedLateness is the watermark lag (WithAllowedLateness).
func (t *Topology) AllowedLateness() time.Duration { return t.lateness }

// SubTopologies returns the sub-topologies in id order.
func (t *Topology) SubTopologies() []SubTopology {
	out := make([]SubTopology, len(t.subs))
	for i, s := range t.subs {
		out[i] = *s
		out[i].nodes = nil
	}
	return out
}

// SubTopologyOf returns the id of the sub-topology that reads topic.
func (t *Topology) SubTopologyOf(topic string) (int, bool) {
	for _, s := range t.subs {
		if slices.Contains(s.SourceTopics, topic) {
			return s.ID, true
		}
	}
	return 0, false
}

// SourceTopics are all topics the application consumes, repartition topics
// included, sorted.
func (t *Topology) SourceTopics() []string {
	var out []string
	for _, s := range t.subs {
		out = append(out, s.SourceTopics...)
	}
	sort.Strings(out)
	return out
}

// SinkTopics are all topics the application produces to (changelogs
// excluded), sorted.
func (t *Topology) SinkTopics() []string {
	var out []string
	for _, s := range t.subs {
		for _, topic := range s.SinkTopics {
			if !slices.Contains(out, topic) {
				out = append(out, topic)
			}
		}
	}
	sort.Strings(out)
	return out
}

// RepartitionTopics are the internal topics between sub-topologies.
func (t *Topology) RepartitionTopics() []InternalTopic { return slices.Clone(t.repart) }

// IsRepartitionTopic reports whether topic is one of RepartitionTopics.
func (t *Topology) IsRepartitionTopic(topic string) bool {
	for _, r := range t.repart {
		if r.Name == topic {
			return true
		}
	}
	return false
}

// ChangelogTopics are the changelog topics of the logged stores, in store
// declaration order, with their cleanup policy.
func (t *Topology) ChangelogTopics() []InternalTopic {
	var out []InternalTopic
	for _, name := range t.storeSeq {
		info := t.stores[name]
		if info.Changelog == "" {
			continue
		}
		conf := map[string]string{"cleanup.policy": "compact"}
		if info.Spec.Kind != store.KindKeyValue {
			conf["cleanup.policy"] = "compact,delete"
			conf["retention.ms"] = fmt.Sprint(info.Spec.WindowSize + info.Spec.Retention + 24*3600*1000)
		}
		for k, v := range info.Spec.ChangelogConfig {
			conf[k] = v
		}
		out = append(out, InternalTopic{Name: info.Changelog, Config: conf})
	}
	return out
}

// Stores describes every store, in declaration order.
func (t *Topology) Stores() []StoreInfo {
	out := make([]StoreInfo, 0, len(t.storeSeq))
	for _, name := range t.storeSeq {
		out = append(out, *t.stores[name])
	}
	return out
}

// Store describes the named store.
func (t *Topology) Store(name string) (StoreInfo, bool) {
	info, ok := t.stores[name]
	if !ok {
		return StoreInfo{}, false
	}
	return *info, true
}

// CopartitionGroups lists the topic sets that must have equal partition
// counts, one per join.
func (t *Topology) CopartitionGroups() []CopartitionGroup { return slices.Clone(t.copart) }

// CheckCopartitioning verifies the co-partitioning requirements against real
// partition counts; the runtime calls it at startup with counts from the
// cluster. Repartition topics the runtime sizes itself may be reported as 0,
// which matches anything.
func (t *Topology) CheckCopartitioning(partitions func(topic string) (int32, bool)) error {
	for _, g := range t.copart {
		var want int32
		var first string
		for _, topic := range g.Topics {
			n, ok := partitions(topic)
			if !ok {
				return fmt.Errorf("operator %q: %w: partition count of %q unknown", g.Operator, ErrNotCopartitioned, topic)
			}
			if n == 0 {
				continue
			}
			if want == 0 {
				want, first = n, topic
				continue
			}
			if n != want {
				return fmt.Errorf("operator %q: %w: %q has %d partitions, %q has %d", g.Operator, ErrNotCopartitioned, first, want, topic, n)
			}
		}
	}
	return nil
}
