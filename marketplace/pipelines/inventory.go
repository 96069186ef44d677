package pipelines

import (
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Availability is the inventory pipeline's row for one sku.
//
// Available = stock − reserved − sold, where the generator's inventory
// events carry every term as a signed Delta:
//
//   - OnHand is the sum of restock and adjust deltas: stock received,
//     returned, counted or lost;
//   - Held is the sum of −Delta over reserve and release events: units in
//     open carts (reserved) plus units of captured orders (sold — a sale
//     keeps its reservation; only removals, abandoned carts and failed
//     payments release one);
//   - Available = OnHand − Held, which is the running sum of Delta over all
//     of the sku's events. It may be negative after an oversell.
//
// The sum is commutative, so the row after a set of events does not
// depend on the order they were processed in.
type Availability struct {
	SKU       string `json:"sku"`
	Tenant    string `json:"tenant"`
	OnHand    int64  `json:"on_hand"`
	Held      int64  `json:"held"`
	Available int64  `json:"available"`
	Events    int64  `json:"events"`
}

// Apply folds one inventory event into the row.
func (a Availability) Apply(e schemas.InventoryEvent) Availability {
	a.SKU, a.Tenant = e.SKU, e.Tenant
	switch e.Kind {
	case schemas.InventoryReserve, schemas.InventoryRelease:
		a.Held -= int64(e.Delta)
	default:
		a.OnHand += int64(e.Delta)
	}
	a.Available = a.OnHand - a.Held
	a.Events++
	return a
}

// AvailabilitySerde is the value serde of the store and the output topic:
// JSON, so that the HTTP query answers and the topic are readable.
func AvailabilitySerde() serde.Serde[Availability] { return serde.JSON[Availability]() }

// addInventory adds the inventory pipeline:
//
//	Inputs.Inventory (key sku, InventoryEvent) → aggregate per sku
//	  → table in store StoreAvailability (queryable: /stores/inventory-availability/keys/<sku>)
//	  → its changelog stream → Outputs.Availability (key sku, Availability JSON)
//
// The inventory topic is keyed by sku already, so there is no repartition.
func addInventory(_ *topology.Builder, in inputs, cfg Config) {
	in.inventory.
		GroupByKey(topology.Named("inventory-by-sku")).
		Aggregate(func() Availability { return Availability{} },
			func(_ string, e schemas.InventoryEvent, a Availability) Availability { return a.Apply(e) },
			AvailabilitySerde(), topology.Named(StoreAvailability)).
		ToStream(topology.Named("availability-changes")).
		To(cfg.Outputs.Availability, topology.Named("availability-sink"))
}
