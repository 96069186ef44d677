package topology_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A per-order summary from cart additions (quantities keyed by order) and
// payments (cents keyed by payment id, re-keyed to their order), kept in
// one store.
func ExampleGroupedStream_Cogroup() {
	type summary struct{ Items, Cents int64 }
	b := topology.NewBuilder("shop")
	carts := b.Stream("carts", serde.String(), serde.Int64()).GroupByKey()
	// Payments are keyed by payment id, valued "<order>:<cents>".
	payments := b.Stream("payments", serde.String(), serde.String()).
		GroupBy(func(_, v string) string { order, _, _ := strings.Cut(v, ":"); return order }, serde.String(), topology.Named("payments-by-order"))
	carts.Cogroup(func(_ string, qty int64, s summary) summary { s.Items += qty; return s }).
		Cogroup(payments, func(_, v string, s summary) summary {
			_, cents, _ := strings.Cut(v, ":")
			n, _ := strconv.ParseInt(cents, 10, 64)
			s.Cents += n
			return s
		}).
		Aggregate(func() summary { return summary{} }, serde.JSON[summary](), topology.Named("order-summary")).
		ToStream().To("order-summaries")

	topo, err := b.Build()
	if err != nil {
		panic(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	_ = tidemarktest.Input(d, "carts", serde.String(), serde.Int64()).Pipe("o1", 2, 1_000)
	_ = tidemarktest.Input(d, "payments", serde.String(), serde.String()).Pipe("pay-77", "o1:1999", 3_000)
	_ = tidemarktest.Input(d, "carts", serde.String(), serde.Int64()).Pipe("o1", 1, 2_000)

	out, _ := tidemarktest.Output(d, "order-summaries", serde.String(), serde.JSON[summary]()).ReadAll()
	for _, r := range out {
		fmt.Printf("%s %+v @%d\n", r.Key, r.Value, r.Timestamp)
	}
	// Output:
	// o1 {Items:2 Cents:0} @1000
	// o1 {Items:2 Cents:1999} @3000
	// o1 {Items:3 Cents:1999} @3000
}
