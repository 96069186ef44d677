package topology_test

import (
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// siblingCounts counts one grouped stream, unnamed: the existing count,
// and, with added, a second count declared before it (an upgrade that adds
// an aggregation above the existing one in the code).
func siblingCounts(t *testing.T, added bool, opts ...topology.BuilderOption) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app", opts...)
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	if added {
		g.Count() // the new one
	}
	g.Count() // the existing one
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// Unnamed siblings of one kind on one anchor are numbered in declaration
// order (README "Names"): declaring a new one before an existing one gives
// the new one the existing one's store and changelog, and the existing one
// fresh ones. This pins that (the documented limitation) and that the
// topology reports those names as order-dependent, which the App warns of.
func TestSiblingStoresAreNumberedInDeclarationOrderAndReported(t *testing.T) {
	before, after := siblingCounts(t, false), siblingCounts(t, true)
	_, storesBefore, _ := names(t, before)
	_, storesAfter, _ := names(t, after)
	t.Logf("stores before %v, after %v", storesBefore, storesAfter)
	if len(storesBefore) != 1 || len(storesAfter) != 2 || storesAfter[0] != storesBefore[0] {
		t.Fatalf("stores before %v, after %v: want the new count (declared first) to take the existing one's store name", storesBefore, storesAfter)
	}

	if got := before.OrderNumberedState(); len(got) != 0 {
		t.Errorf("a single count reported as order-numbered: %v", got)
	}
	got := after.OrderNumberedState()
	var nodes []string
	for _, st := range after.Describe().SubTopologies {
		for _, n := range st.Nodes {
			if len(n.Stores) > 0 {
				nodes = append(nodes, n.Name)
			}
		}
	}
	slices.Sort(nodes)
	if !slices.Equal(got, nodes) {
		t.Errorf("OrderNumberedState() = %v, want both counts %v", got, nodes)
	}
}

// Named siblings, and unnamed stateless siblings, keep no state under a
// name that depends on declaration order.
func TestNamedOrStatelessSiblingsAreNotReported(t *testing.T) {
	b := topology.NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.String())
	s.Filter(func(string, string) bool { return true }).To("a")
	s.Filter(func(string, string) bool { return true }).To("b")
	g := s.GroupByKey()
	g.Count(topology.Named("first"))
	g.Count(topology.Named("second"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.OrderNumberedState(); len(got) != 0 {
		t.Errorf("OrderNumberedState() = %v, want none", got)
	}
}

// Two unnamed repartitions of one stream write topics named by declaration
// order: both are reported.
func TestSiblingRepartitionTopicsAreReported(t *testing.T) {
	b := topology.NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.String())
	s.Repartition().To("a")
	s.Repartition().To("b")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, _, topics := names(t, topo)
	got := topo.OrderNumberedState()
	if len(got) != 2 {
		t.Fatalf("OrderNumberedState() = %v (topics %v), want both repartitions", got, topics)
	}
	for _, n := range got {
		if !slices.Contains(topo.Describe().RepartitionTopics, "app-"+n+"-repartition") {
			t.Errorf("%q writes no repartition topic of its name: %v", n, topo.Describe().RepartitionTopics)
		}
	}
}
