package topology

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Description is the structure of a built topology, like Kafka Streams'
// TopologyDescription: what Describe prints, as data.
type Description struct {
	SubTopologies []SubTopologyDescription
	// Stores are the topology's stores in declaration order.
	Stores []StoreDescription
	// RepartitionTopics are the internal topics between sub-topologies,
	// sorted.
	RepartitionTopics []string
	// GlobalStores are the global stores (global.go), in declaration order.
	GlobalStores []GlobalStoreDescription
}

// StoreDescription describes one store.
type StoreDescription struct {
	Name string
	// Kind is the store's contract: key-value, window or session.
	Kind string
	// Changelog is the changelog topic, "" when the store is not logged.
	Changelog string
}

// SubTopologyDescription describes one sub-topology.
type SubTopologyDescription struct {
	ID    int
	Nodes []NodeDescription
}

// NodeDescription describes one node.
type NodeDescription struct {
	Name     string
	Kind     NodeKind
	Operator string
	// Topics are a source's topics or a sink's topic.
	Topics       []string
	Stores       []string
	Predecessors []string
	Successors   []string
	// Placement is a sink's tenant placement (WithPlacement), "" without.
	Placement string
}

// Describe returns the topology's structure; its String form is stable and
// meant for golden files and logs.
func (t *Topology) Describe() Description {
	var d Description
	for _, st := range t.subs {
		sd := SubTopologyDescription{ID: st.ID}
		for _, n := range st.nodes {
			nd := NodeDescription{Name: n.name, Kind: n.kind, Operator: n.op, Topics: n.topics, Stores: n.stores}
			if ps, ok := n.impl.(placedSink); ok && n.kind == KindSink && ps.tenantPlacement() != nil {
				nd.Placement = ps.tenantPlacement().String()
			}
			for _, p := range n.parents {
				nd.Predecessors = append(nd.Predecessors, p.name)
			}
			for _, c := range n.children {
				nd.Successors = append(nd.Successors, c.name)
			}
			sd.Nodes = append(sd.Nodes, nd)
		}
		d.SubTopologies = append(d.SubTopologies, sd)
	}
	for _, info := range t.Stores() {
		d.Stores = append(d.Stores, StoreDescription{Name: info.Spec.Name, Kind: info.Spec.Kind.String(), Changelog: info.Changelog})
	}
	for _, r := range t.repart {
		d.RepartitionTopics = append(d.RepartitionTopics, r.Name)
	}
	sort.Strings(d.RepartitionTopics)
	for _, g := range t.globals {
		d.GlobalStores = append(d.GlobalStores, GlobalStoreDescription{Name: g.Spec.Name, Topic: g.Topic, ReadBy: slices.Clone(g.Nodes)})
	}
	return d
}

// String renders the description in the layout of Kafka Streams'
// TopologyDescription.
func (d Description) String() string {
	var b strings.Builder
	b.WriteString("Topologies:\n")
	for _, st := range d.SubTopologies {
		fmt.Fprintf(&b, "   Sub-topology: %d\n", st.ID)
		for _, n := range st.Nodes {
			switch {
			case n.Kind == KindSource:
				fmt.Fprintf(&b, "    Source: %s (topics: [%s])\n", n.Name, strings.Join(n.Topics, ", "))
			case n.Kind == KindSink && n.Placement != "":
				fmt.Fprintf(&b, "    Sink: %s (topic: %s, tenant placement: %s)\n", n.Name, n.Topics[0], n.Placement)
			case n.Kind == KindSink:
				fmt.Fprintf(&b, "    Sink: %s (topic: %s)\n", n.Name, n.Topics[0])
			default:
				fmt.Fprintf(&b, "    Processor: %s (stores: [%s])\n", n.Name, strings.Join(n.Stores, ", "))
			}
			if len(n.Successors) > 0 {
				fmt.Fprintf(&b, "      --> %s\n", strings.Join(n.Successors, ", "))
			}
			if len(n.Predecessors) > 0 {
				fmt.Fprintf(&b, "      <-- %s\n", strings.Join(n.Predecessors, ", "))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(d.describeGlobals())
	return b.String()
}

// String renders Describe.
func (t *Topology) String() string { return t.Describe().String() }
