package topology_test

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Cart adds per SKU, and a per-minute count of payments per user, run in the
// test driver.
func Example() {
	b := topology.NewBuilder("marketplace")
	// Cart lines are keyed "<sku>-<cart>"; totals are per SKU.
	b.Stream("cart-adds", serde.String(), serde.Int64()).
		SelectKey(func(line string, _ int64) string { return line[:3] }).
		GroupByKey(topology.Named("adds-by-sku")).
		Aggregate(func() int64 { return 0 }, func(_ string, q, sum int64) int64 { return sum + q }, serde.Int64(), topology.Named("sku-adds")).
		ToStream().To("sku-adds")

	payments := b.Stream("payments", serde.String(), serde.Int64()) // user -> amount
	topology.WindowedBy(payments.GroupByKey(), topology.TumblingWindows(time.Minute, 0)).
		Count(topology.Named("payments-per-minute"), topology.EmitFinal()).
		ToStream().To("payment-velocity")

	topo, err := b.Build()
	if err != nil {
		panic(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		panic(err)
	}
	defer d.Close()

	adds := tidemarktest.Input(d, "cart-adds", serde.String(), serde.Int64())
	_ = adds.Pipe("mug-cart-1", 2, 1_000)
	_ = adds.Pipe("mug-cart-2", 1, 2_000)
	pays := tidemarktest.Input(d, "payments", serde.String(), serde.Int64())
	_ = pays.Pipe("mallory", 100, 10_000)
	_ = pays.Pipe("mallory", 100, 20_000)
	_ = pays.Pipe("mallory", 100, 70_000) // closes [0, 60000)

	totals, _ := tidemarktest.Output(d, "sku-adds", serde.String(), serde.Int64()).ReadAll()
	for _, r := range totals {
		fmt.Println(r.Key, r.Value, r.Timestamp)
	}
	velocity, _ := tidemarktest.Output(d, "payment-velocity", topology.TimeWindowedSerde(serde.String(), time.Minute), serde.Int64()).ReadAll()
	for _, r := range velocity {
		fmt.Println(r.Key, r.Value)
	}
	// Output:
	// mug 2 1000
	// mug 3 2000
	// [mallory@0/60000] 2
}
