package topology_test

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Payments enriched with their merchant's name from a global table: the
// payments are keyed by payment id, the merchants by merchant id, and the
// two topics have different partition counts.
func ExampleBuilder_GlobalTable() {
	type Payment struct {
		Merchant string
		Cents    int64
	}
	b := topology.NewBuilder("payments")
	merchants := b.GlobalTable("merchants", serde.String(), serde.String(), topology.Named("merchants"))
	b.Stream("payments", serde.String(), serde.JSON[Payment]()).
		LeftJoinGlobal(merchants,
			func(_ string, p Payment) string { return p.Merchant },
			func(id string, p Payment, name string, found bool) string {
				if !found {
					name = "unknown merchant " + p.Merchant
				}
				return fmt.Sprintf("%s: %d cents at %s", id, p.Cents, name)
			}, topology.Named("with-merchant")).
		WithSerdes(nil, serde.String()).
		To("enriched-payments")
	topo, err := b.Build()
	if err != nil {
		panic(err)
	}
	fmt.Print(topo)

	d, err := tidemarktest.New(topo, tidemarktest.WithPartitions("payments", 6), tidemarktest.WithPartitions("merchants", 3))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	ms := tidemarktest.Input(d, "merchants", serde.String(), serde.String())
	ps := tidemarktest.Input(d, "payments", serde.String(), serde.JSON[Payment]())
	_ = ms.Pipe("m1", "Corner Café", 1_000)
	_ = ps.Pipe("pay-1", Payment{"m1", 450}, 2_000)
	_ = ps.Pipe("pay-2", Payment{"m2", 990}, 3_000)
	_ = ms.Pipe("m1", "Corner Café & Bakery", 4_000) // later payments see the update
	_ = ps.Pipe("pay-3", Payment{"m1", 300}, 5_000)
	out, _ := tidemarktest.Output(d, "enriched-payments", serde.String(), serde.String()).ReadAll()
	for _, r := range out {
		fmt.Println(r.Value)
	}
	// Output:
	// Topologies:
	//    Sub-topology: 0
	//     Source: payments-SOURCE (topics: [payments])
	//       --> with-merchant
	//     Processor: with-merchant (stores: [])
	//       --> with-merchant-SINK-1
	//       <-- payments-SOURCE
	//     Sink: with-merchant-SINK-1 (topic: enriched-payments)
	//       <-- with-merchant
	//
	//    Global store: merchants (topic: merchants, will not generate tasks)
	//       --> with-merchant
	//
	// pay-1: 450 cents at Corner Café
	// pay-2: 990 cents at unknown merchant m2
	// pay-3: 300 cents at Corner Café & Bakery
}
