package tidemarktest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Cart events are keyed by cart id; counting by SKU must first move every
// SKU's events to one partition.
func TestGoldenRepartitionBeforeAggregation(t *testing.T) {
	b := topology.NewBuilder("shop")
	b.Stream("cart-events", serde.String(), serde.String()).
		SelectKey(func(_ string, sku string) string { return sku }).
		GroupByKey(topology.Named("by-sku")).
		Count(topology.Named("adds-per-sku")).
		ToStream().To("sku-adds")
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(4))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	tr := newTranscript(t, d)
	tr.note("topology:\n%s", strings.TrimSpace(topo.Describe().String()))
	watch(tr, "sku-adds", tidemarktest.Output(d, "sku-adds", serde.String(), serde.Int64()))
	in := tidemarktest.Input(d, "cart-events", serde.String(), serde.String())
	tr.note("carts land on different partitions; each SKU's count is still one sequence")
	pipe(tr, in, "cart-events", "cart-1", "mug", 1000)
	pipe(tr, in, "cart-events", "cart-2", "mug", 2000)
	pipe(tr, in, "cart-events", "cart-3", "mug", 3000)
	pipe(tr, in, "cart-events", "cart-2", "lamp", 4000)
	pipe(tr, in, "cart-events", "cart-4", "lamp", 5000)
	tr.check()

	var partitions []int32
	for _, p := range []int32{0, 1, 2, 3} {
		if _, err := d.Store("adds-per-sku", p); err == nil {
			partitions = append(partitions, p)
		}
	}
	if len(partitions) != 4 {
		t.Errorf("adds-per-sku is open in partitions %v, want one task per partition of the repartition topic", partitions)
	}
	got, err := tidemarktest.ReadStore(d, "adds-per-sku", serde.String(), serde.Int64())
	must(t, err)
	counts := map[string]int64{}
	for _, e := range got {
		if _, dup := counts[e.Key]; dup {
			t.Errorf("SKU %q is counted in two partitions", e.Key)
		}
		counts[e.Key] = e.Value
	}
	if counts["mug"] != 3 || counts["lamp"] != 2 {
		t.Errorf("store counts = %v, want mug 3, lamp 2", counts)
	}
}

func TestRepartitionTopicsAreNamedAndListed(t *testing.T) {
	b := topology.NewBuilder("shop")
	s := b.Stream("cart-events", serde.String(), serde.String())
	s.GroupBy(func(_, sku string) string { return sku }, serde.String(), topology.Named("by-sku")).Count(topology.Named("adds"))
	s.SelectKey(func(k, _ string) string { return k }).Repartition(topology.WithPartitions(8)).To("rekeyed")
	topo, err := b.Build()
	must(t, err)
	rt := topo.RepartitionTopics()
	if len(rt) != 2 || rt[0].Name != "shop-by-sku-repartition" || rt[1].Partitions != 8 {
		t.Fatalf("repartition topics = %+v, want shop-by-sku-repartition and one with 8 partitions", rt)
	}
	if subs := topo.SubTopologies(); len(subs) != 3 {
		t.Errorf("got %d sub-topologies, want 3 (source, count after by-sku, sink after repartition)", len(subs))
	}
	cl := topo.ChangelogTopics()
	if len(cl) != 1 || cl[0].Name != "shop-adds-changelog" || cl[0].Config["cleanup.policy"] != "compact" {
		t.Errorf("changelogs = %+v, want shop-adds-changelog, compacted", cl)
	}
}

func TestDriverRejectsJoinInputsWithDifferentPartitionCounts(t *testing.T) {
	b := topology.NewBuilder("shop")
	orders := b.Stream("orders", serde.String(), serde.String())
	payments := b.Stream("payments", serde.String(), serde.String())
	orders.Join(payments, func(_, o, p string) string { return o + p }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("paid-orders")).To("paid")
	topo, err := b.Build()
	must(t, err)
	groups := topo.CopartitionGroups()
	if len(groups) != 1 || groups[0].Operator != "paid-orders" || strings.Join(groups[0].Topics, ",") != "orders,payments" {
		t.Fatalf("co-partition groups = %+v, want paid-orders over orders,payments", groups)
	}
	_, err = tidemarktest.New(topo, tidemarktest.WithPartitions("orders", 3), tidemarktest.WithPartitions("payments", 2))
	if !errors.Is(err, topology.ErrNotCopartitioned) || !strings.Contains(err.Error(), "paid-orders") {
		t.Fatalf("New with 3 and 2 partitions: err = %v, want ErrNotCopartitioned naming paid-orders", err)
	}
	d, err := tidemarktest.New(topo, tidemarktest.WithPartitions("orders", 3), tidemarktest.WithPartitions("payments", 3))
	must(t, err)
	must(t, d.Close())
}

func TestRepartitionTopicTakesItsWritersPartitionCount(t *testing.T) {
	b := topology.NewBuilder("shop")
	b.Stream("cart-events", serde.String(), serde.String()).
		GroupBy(func(_, sku string) string { return sku }, serde.String(), topology.Named("by-sku")).
		Count(topology.Named("adds"))
	d := newDriver(t, b, tidemarktest.WithPartitions("cart-events", 3))
	var tasks []string
	for _, task := range d.Tasks() {
		tasks = append(tasks, task.ID().String())
	}
	if strings.Join(tasks, " ") != "0_0 0_1 0_2 1_0 1_1 1_2" {
		t.Errorf("tasks %v, want three per sub-topology: shop-by-sku-repartition has cart-events' 3 partitions", tasks)
	}
}
