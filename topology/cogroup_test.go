package topology_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// orderSummary cogroups carts (string values, keyed by order id),
// payments (int64 cents, keyed by order id) and shipments (keyed by
// parcel, re-keyed to the order id through a repartition).
func orderSummary(opts ...topology.RepartitionOption) (*topology.Builder, topology.CogroupedStream[string, string]) {
	b := topology.NewBuilder("shop")
	carts := b.Stream("carts", serde.String(), serde.String()).GroupByKey()
	payments := b.Stream("payments", serde.String(), serde.Int64()).GroupByKey()
	shipments := b.Stream("shipments", serde.String(), serde.String()).
		GroupBy(func(_, order string) string { return order }, serde.String(), append(opts, topology.Named("shipments-by-order"))...)
	cg := carts.Cogroup(func(_, item, s string) string { return s + "c:" + item + ";" }).
		Cogroup(payments, func(_ string, cents int64, s string) string { return s + "p;" }).
		Cogroup(shipments, func(_, _, s string) string { return s + "s;" })
	return b, cg
}

func TestCogroupTopology(t *testing.T) {
	b, cg := orderSummary()
	cg.Aggregate(func() string { return "" }, serde.String(), topology.Named("order-summary")).ToStream().To("summaries")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	info, ok := topo.Store("order-summary")
	if !ok || info.Spec.Kind != store.KindKeyValue || !info.Timestamped || info.Changelog != "shop-order-summary-changelog" ||
		!slices.Equal(info.Nodes, []string{"order-summary"}) {
		t.Errorf("store %+v (found %v), want one timestamped key-value store order-summary of node order-summary, logged to shop-order-summary-changelog", info, ok)
	}
	if n := len(topo.Stores()); n != 1 {
		t.Errorf("%d stores, want the one shared aggregate store", n)
	}
	subs := topo.SubTopologies()
	if len(subs) != 2 {
		t.Fatalf("%d sub-topologies, want 2 (the shipments re-key, then the cogroup)", len(subs))
	}
	sub, _ := topo.SubTopologyOf("carts")
	if want := []string{"carts", "payments", "shop-shipments-by-order-repartition"}; !slices.Equal(subs[sub].SourceTopics, want) {
		t.Errorf("cogroup sub-topology reads %v, want %v", subs[sub].SourceTopics, want)
	}
	want := []topology.CopartitionGroup{{Operator: "order-summary", Topics: []string{"carts", "payments", "shop-shipments-by-order-repartition"}}}
	if got := topo.CopartitionGroups(); !slices.EqualFunc(got, want, func(a, b topology.CopartitionGroup) bool {
		return a.Operator == b.Operator && slices.Equal(a.Topics, b.Topics)
	}) {
		t.Errorf("copartition groups %v, want %v", got, want)
	}
	nodes, _, _ := names(t, topo)
	for _, n := range []string{"order-summary-cogroup-0", "order-summary-cogroup-1", "order-summary-cogroup-2", "order-summary-merge", "order-summary"} {
		if !slices.Contains(nodes, n) {
			t.Errorf("no node %q in %v: a named cogroup names its parts after itself", n, nodes)
		}
	}
}

func TestCogroupSharesPrefixesAndDoesNotAliasInputs(t *testing.T) {
	b := topology.NewBuilder("app")
	in := func(topic string) topology.GroupedStream[string, string] {
		return b.Stream(topic, serde.String(), serde.String()).GroupByKey()
	}
	add := func(_, v, agg string) string { return agg + v }
	// Three inputs: a slice grown by append has spare capacity by then,
	// which two cogroups extending the same prefix must not share.
	base := in("x").Cogroup(add).Cogroup(in("y"), add).Cogroup(in("z"), add)
	withA := base.Cogroup(in("a"), add)
	withB := base.Cogroup(in("b"), add)
	withA.Aggregate(nil, serde.String(), topology.Named("with-a")).ToStream().To("out-a")
	withB.Aggregate(nil, serde.String(), topology.Named("with-b")).ToStream().To("out-b")
	base.Aggregate(nil, serde.String(), topology.Named("base")).ToStream().To("out-base")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{}
	for _, g := range topo.CopartitionGroups() {
		groups[g.Operator] = g.Topics
	}
	if !slices.Equal(groups["with-a"], []string{"a", "x", "y", "z"}) || !slices.Equal(groups["with-b"], []string{"b", "x", "y", "z"}) ||
		!slices.Equal(groups["base"], []string{"x", "y", "z"}) {
		t.Errorf("copartition groups %v, want with-a over a,x,y,z, with-b over b,x,y,z, base over x,y,z", groups)
	}
}

func TestCogroupBuildErrors(t *testing.T) {
	add := func(_, v, agg string) string { return agg + v }
	cases := []struct {
		name     string
		build    func() *topology.Builder
		sentinel error
		mention  string
	}{
		{"repartitions with different fixed partition counts", func() *topology.Builder {
			b := topology.NewBuilder("app")
			by := func(_, v string) string { return v }
			x := b.Stream("x", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(3))
			y := b.Stream("y", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(4))
			x.Cogroup(add).Cogroup(y, add).Aggregate(nil, serde.String(), topology.Named("agg"))
			return b
		}, topology.ErrNotCopartitioned, `operator "agg"`},
		{"windowed: repartitions with different fixed partition counts", func() *topology.Builder {
			b := topology.NewBuilder("app")
			by := func(_, v string) string { return v }
			x := b.Stream("x", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(3))
			y := b.Stream("y", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(4))
			topology.CogroupWindowedBy(x.Cogroup(add).Cogroup(y, add), topology.TumblingWindows(time.Second, 0)).
				Aggregate(nil, serde.String(), topology.Named("wagg"))
			return b
		}, topology.ErrNotCopartitioned, `operator "wagg"`},
		{"the same grouped stream twice", func() *topology.Builder {
			b := topology.NewBuilder("app")
			x := b.Stream("x", serde.String(), serde.String()).GroupByKey()
			x.Cogroup(add).Cogroup(x, add).Aggregate(nil, serde.String(), topology.Named("agg"))
			return b
		}, topology.ErrInvalidTopology, `operator "agg": invalid topology: cogroup input 1`},
		{"an input from another builder", func() *topology.Builder {
			b := topology.NewBuilder("app")
			x := b.Stream("x", serde.String(), serde.String()).GroupByKey()
			y := topology.NewBuilder("other").Stream("y", serde.String(), serde.String()).GroupByKey()
			x.Cogroup(add).Cogroup(y, add).Aggregate(nil, serde.String(), topology.Named("agg"))
			return b
		}, topology.ErrInvalidTopology, "different builder"},
		{"no aggregate serde", func() *topology.Builder {
			b := topology.NewBuilder("app")
			x := b.Stream("x", serde.String(), serde.String()).GroupByKey()
			x.Cogroup(add).Aggregate(nil, nil, topology.Named("agg"))
			return b
		}, topology.ErrMissingSerde, `operator "agg"`},
		{"generated store name under RequireNamedState", func() *topology.Builder {
			b := topology.NewBuilder("app", topology.RequireNamedState())
			x := b.Stream("x", serde.String(), serde.String()).GroupByKey()
			x.Cogroup(add).Aggregate(nil, serde.String())
			return b
		}, topology.ErrInvalidTopology, "COGROUP-AGGREGATE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.build().Build()
			if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("Build() = %v, want %v mentioning %q", err, c.sentinel, c.mention)
			}
		})
	}

	// Fixed counts that agree, and counts left to the runtime, build.
	b := topology.NewBuilder("app")
	by := func(_, v string) string { return v }
	x := b.Stream("x", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(3))
	y := b.Stream("y", serde.String(), serde.String()).GroupBy(by, nil, topology.WithPartitions(3))
	z := b.Stream("z", serde.String(), serde.String()).GroupBy(by, nil)
	x.Cogroup(add).Cogroup(y, add).Cogroup(z, add).Aggregate(nil, serde.String(), topology.Named("agg"))
	if _, err := b.Build(); err != nil {
		t.Errorf("equal fixed counts: %v", err)
	}
}

func TestCogroupWindowedOutputBound(t *testing.T) {
	b, cg := orderSummary()
	topology.CogroupWindowedBy(cg, topology.TumblingWindows(10*time.Second, 2*time.Second)).
		Aggregate(nil, serde.String(), topology.Named("w"), topology.EmitFinal()).
		ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := topo.SubTopologyOf("carts")
	bounds, err := topo.OutputBounds(sub)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bounds.Sinks["out"].String(), "window(w size=10000 advance=10000 grace=2000)"; got != want {
		t.Errorf("output bound %s, want %s (the windowed aggregation's clock bounds a cogroup like any window)", got, want)
	}
	if !slices.Equal(bounds.Clocks, []string{"w"}) {
		t.Errorf("clocks %v, want [w]", bounds.Clocks)
	}
}
