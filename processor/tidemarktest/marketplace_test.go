package tidemarktest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

type CartAdd struct {
	User string `json:"user"`
	SKU  string `json:"sku"`
	Qty  int64  `json:"qty"`
}

type Item struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

type Payment struct {
	User   string `json:"user"`
	Amount int64  `json:"amount_cents"`
	Items  []Item `json:"items"`
}

type Velocity struct {
	Count int64  `json:"count"`
	Total int64  `json:"total_cents"`
	Tier  string `json:"tier"`
}

type Alert struct {
	User  string `json:"user"`
	Count int64  `json:"count"`
	Total int64  `json:"total_cents"`
	Tier  string `json:"tier"`
	Start int64  `json:"window_start"`
}

// marketplaceTopology: open demand per SKU (cart adds minus paid items) and
// a payment-velocity alert per user over 5-minute hopping windows.
func marketplaceTopology() *topology.Builder {
	b := topology.NewBuilder("marketplace", topology.RequireNamedState())
	adds := b.Stream("cart-adds", serde.String(), serde.JSON[CartAdd]())
	payments := b.Stream("payments", serde.String(), serde.JSON[Payment]())
	users := b.Table("users", serde.String(), serde.String(), topology.Named("user-tiers"))

	added := adds.Map(func(_ string, a CartAdd) (string, int64) { return a.SKU, a.Qty }, topology.Named("add-by-sku"))
	paid := payments.FlatMap(func(_ string, p Payment) []topology.KeyValue[string, int64] {
		out := make([]topology.KeyValue[string, int64], len(p.Items))
		for i, it := range p.Items {
			out[i] = topology.KeyValue[string, int64]{Key: it.SKU, Value: -it.Qty}
		}
		return out
	}, topology.Named("paid-by-sku"))
	added.Merge(paid).WithSerdes(serde.String(), serde.Int64()).
		GroupByKey(topology.Named("demand-by-sku")).
		Aggregate(func() int64 { return 0 }, func(_ string, d, sum int64) int64 { return sum + d }, serde.Int64(), topology.Named("sku-demand")).
		ToStream().To("sku-demand")

	enriched := payments.SelectKey(func(_ string, p Payment) string { return p.User }, topology.Named("payment-user")).
		LeftJoinTable(users, func(_ string, p Payment, tier string, ok bool) Velocity {
			if !ok {
				tier = "new"
			}
			return Velocity{Count: 1, Total: p.Amount, Tier: tier}
		}, topology.Named("payment-tier")).
		WithSerdes(serde.String(), serde.JSON[Velocity]())
	topology.WindowedBy(enriched.GroupByKey(), topology.HoppingWindows(5*time.Minute, time.Minute, 30*time.Second)).
		Reduce(func(agg, v Velocity) Velocity {
			return Velocity{Count: agg.Count + v.Count, Total: agg.Total + v.Total, Tier: v.Tier}
		}, topology.Named("payment-velocity"), topology.EmitFinal()).
		ToStream().
		Filter(func(_ topology.Windowed[string], v Velocity) bool {
			return v.Count >= 3 || (v.Tier == "new" && v.Total > 50_000)
		}, topology.Named("suspicious")).
		Map(func(w topology.Windowed[string], v Velocity) (string, Alert) {
			return w.Key, Alert{User: w.Key, Count: v.Count, Total: v.Total, Tier: v.Tier, Start: w.Start}
		}, topology.Named("to-alert")).
		WithSerdes(serde.String(), serde.JSON[Alert]()).
		To("fraud-alerts")
	return b
}

const minute = int64(60_000)

func TestMarketplaceEndToEnd(t *testing.T) {
	topo, err := marketplaceTopology().Build()
	must(t, err)
	d, err := tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(2))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	users := tidemarktest.Input(d, "users", serde.String(), serde.String())
	adds := tidemarktest.Input(d, "cart-adds", serde.String(), serde.JSON[CartAdd]())
	pays := tidemarktest.Input(d, "payments", serde.String(), serde.JSON[Payment]())
	demand := tidemarktest.Output(d, "sku-demand", serde.String(), serde.Int64())
	alerts := tidemarktest.Output(d, "fraud-alerts", serde.String(), serde.JSON[Alert]())

	must(t, users.Pipe("bob", "gold", 0))
	must(t, users.Pipe("alice", "gold", 0))
	must(t, adds.Pipe("cart-m", CartAdd{User: "mallory", SKU: "mug", Qty: 2}, 9*minute))
	must(t, adds.Pipe("cart-m", CartAdd{User: "mallory", SKU: "lamp", Qty: 1}, 9*minute+1))
	must(t, adds.Pipe("cart-b", CartAdd{User: "bob", SKU: "mug", Qty: 1}, 9*minute+2))
	must(t, adds.Pipe("cart-a", CartAdd{User: "alice", SKU: "desk", Qty: 1}, 9*minute+3))
	// Mallory, unknown to the users table, pays three times within a minute.
	must(t, pays.Pipe("p1", Payment{User: "mallory", Amount: 1_000, Items: []Item{{"mug", 1}}}, 10*minute))
	must(t, pays.Pipe("p2", Payment{User: "mallory", Amount: 1_000, Items: []Item{{"mug", 1}}}, 10*minute+30_000))
	must(t, pays.Pipe("p3", Payment{User: "mallory", Amount: 2_000, Items: []Item{{"lamp", 1}}}, 11*minute))
	// Bob is gold: one large payment is not suspicious.
	must(t, pays.Pipe("p4", Payment{User: "bob", Amount: 90_000, Items: []Item{{"mug", 1}}}, 11*minute+1))
	if n := alerts.Len(); n != 0 {
		t.Fatalf("%d alerts before any window closed; emit-final must wait for window end + grace", n)
	}
	// Later payments move stream time on in both users' tasks, closing the
	// windows of minute 10 and 11.
	must(t, pays.Pipe("p5", Payment{User: "mallory", Amount: 100}, 25*minute))
	must(t, pays.Pipe("p6", Payment{User: "bob", Amount: 100}, 25*minute))

	var got []Alert
	for _, r := range readAll(t, alerts) {
		if r.Key != r.Value.User {
			t.Errorf("alert keyed %q for user %q", r.Key, r.Value.User)
		}
		got = append(got, r.Value)
	}
	// Windows [s, s+5min) holding all three of Mallory's payments (10:00,
	// 10:30, 11:00) start at 7, 8, 9 and 10 minutes.
	var want []Alert
	for _, start := range []int64{7, 8, 9, 10} {
		want = append(want, Alert{User: "mallory", Count: 3, Total: 4_000, Tier: "new", Start: start * minute})
	}
	if !slices.Equal(got, want) {
		t.Errorf("alerts:\n got %+v\nwant %+v", got, want)
	}

	final := map[string]int64{}
	lastTS := map[string]int64{}
	for _, r := range readAll(t, demand) {
		final[r.Key] = r.Value
		lastTS[r.Key] = r.Timestamp
	}
	if fmt.Sprint(final) != "map[desk:1 lamp:0 mug:0]" {
		t.Errorf("open demand per SKU = %v, want desk 1, lamp 0, mug 0", final)
	}
	if lastTS["mug"] != 11*minute+1 || lastTS["desk"] != 9*minute+3 {
		t.Errorf("demand timestamps %v: want each SKU's latest input (mug 11m+1ms, desk 9m+3ms)", lastTS)
	}
	stored, err := tidemarktest.ReadStore(d, "sku-demand", serde.String(), serde.Int64())
	must(t, err)
	if len(stored) != 3 {
		t.Errorf("sku-demand store holds %+v, want 3 SKUs", stored)
	}
	if m := d.Metrics(); m.TotalDropped() != 0 {
		t.Errorf("dropped records: %+v", m.Dropped)
	}
	subs := topo.SubTopologies()
	if len(subs) != 3 || len(topo.CopartitionGroups()) != 1 {
		t.Errorf("%d sub-topologies, co-partition groups %+v:\n%s", len(subs), topo.CopartitionGroups(), topo.Describe())
	}
}
