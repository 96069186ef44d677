package gen_test

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/schemas"
)

// A pipeline test generates the same stream in memory to compute the result
// the pipeline must produce, here the available stock per sku that an
// inventory-availability topology would publish.
func ExampleGenerator_Take() {
	cfg := gen.Config{Seed: 42, Tenants: 2, SKUsPerTenant: 20}
	g, err := gen.New(cfg)
	if err != nil {
		panic(err)
	}
	stock := map[string]int64{}
	captured := 0
	for _, ev := range g.Take(100000) {
		switch v := ev.Value.(type) {
		case schemas.InventoryEvent:
			stock[v.SKU] += int64(v.Delta)
		case schemas.PaymentEvent:
			if v.Status == schemas.PaymentCaptured {
				captured++
			}
		}
	}
	fmt.Println("seller-001-sku-00001 available:", stock["seller-001-sku-00001"])
	fmt.Println("orders captured:", captured)
	// Output:
	// seller-001-sku-00001 available: 88
	// orders captured: 4474
}
