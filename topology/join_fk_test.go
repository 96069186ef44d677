package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func lineSKU(_ string, v string) (string, bool) { return v, v != "" }

// A foreign-key join needs both tables' serdes (it hashes and stores the
// left value, and sends keys and values through its internal topics), and
// under RequireNamedState a name for its topics and stores.
func TestForeignKeyJoinBuildErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *topology.Builder)
		err   error
		msg   string
	}{
		{"left value serde", func(b *topology.Builder) {
			l := b.Table("lines", serde.String(), serde.String()).MapValues(func(_, v string) []string { return []string{v} })
			p := b.Table("products", serde.String(), serde.Int64())
			l.JoinOnForeignKey(p, func(_ string, v []string) (string, bool) { return v[0], true },
				func(_ string, v []string, p int64) int64 { return p }, topology.Named("priced"))
		}, topology.ErrMissingSerde, "value serde of the left table"},
		{"generated names under RequireNamedState", func(b *topology.Builder) {
			l := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
			p := b.Table("products", serde.String(), serde.Int64(), topology.Named("products"))
			l.LeftJoinOnForeignKey(p, lineSKU, func(_ string, v string, p int64, _ bool) int64 { return p })
		}, topology.ErrInvalidTopology, "RequireNamedState"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app", topology.RequireNamedState())
			c.build(b)
			_, err := b.Build()
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Build: %v, want %v mentioning %q", err, c.err, c.msg)
			}
		})
	}
}

// Named names every node, store and internal topic of the join after it.
func TestForeignKeyJoinNames(t *testing.T) {
	b := topology.NewBuilder("app", topology.RequireNamedState())
	l := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
	p := b.Table("products", serde.String(), serde.Int64(), topology.Named("products"))
	j := l.JoinOnForeignKey(p, lineSKU, func(_ string, v string, p int64) int64 { return p }, topology.Named("priced"))
	j.ToStream().WithSerdes(nil, serde.Int64()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nodes, stores, topics := names(t, topo)
	for _, want := range []string{"priced-subscribe", "priced-subscription", "priced-subscription-store", "priced-foreign",
		"priced-respond", "priced-response", "priced-resolve", "priced-unjoined", "priced"} {
		if !strings.Contains(","+strings.Join(nodes, ",")+",", ","+want+",") {
			t.Errorf("nodes %v, want %s", nodes, want)
		}
	}
	if got, want := strings.Join(stores, ","), "lines,products,priced-subscription-store,priced"; got != want {
		t.Errorf("stores %s, want %s", got, want)
	}
	for _, want := range []string{"app-priced-subscription-repartition", "app-priced-response-repartition"} {
		if !strings.Contains(strings.Join(topics, ","), want) {
			t.Errorf("topics %v, want %s", topics, want)
		}
	}
	if j.Name() != "priced" || j.StoreName() != "" {
		t.Errorf("result table Name %q StoreName %q, want priced and \"\" (its store holds the joined inputs, not VR)", j.Name(), j.StoreName())
	}
}
