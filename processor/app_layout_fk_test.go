package processor

import (
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A foreign-key join's subscription topic is sized like the right table
// and its response topic like the left one, not like the sub-topology
// writing them (InternalTopic.SizedByReader), also when the right table
// is read from a repartition topic.
func TestSizeLayoutForeignKeyJoin(t *testing.T) {
	t.Parallel()
	for _, rekeyed := range []bool{false, true} {
		b := topology.NewBuilder("app")
		lines := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
		var products topology.Table[string, string]
		if rekeyed {
			products = b.Stream("price-events", serde.String(), serde.String()).
				SelectKey(func(_, v string) string { return v }).
				GroupByKey(topology.Named("by-sku")).
				Reduce(func(_, v string) string { return v }, topology.Named("products"))
		} else {
			products = b.Table("products", serde.String(), serde.String(), topology.Named("products"))
		}
		lines.JoinOnForeignKey(products, func(_, v string) (string, bool) { return v, v != "" },
			func(_, l, p string) string { return l + p }, topology.Named("priced")).ToStream().To("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		l := &layout{partitions: map[string]int32{"lines": 2, "products": 3, "price-events": 5, "out": 1}}
		if err := sizeLayout(topo, l); err != nil {
			t.Fatalf("sizeLayout: %v\n%s", err, topo.Describe())
		}
		right := int32(3)
		if rekeyed {
			right = 5
		}
		for topic, want := range map[string]int32{"app-priced-subscription-repartition": right, "app-priced-response-repartition": 2} {
			if got := l.partitions[topic]; got != want {
				t.Errorf("rekeyed=%v: %s has %d partitions, want %d (tasks %v)", rekeyed, topic, got, want, l.tasks)
			}
		}
	}
}
