package pipelines_test

import (
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
)

func product(sku string, cents, at int64) schemas.ProductEvent {
	return schemas.ProductEvent{EventID: "p-" + sku, Tenant: "seller-001", SKU: sku, Title: "Lamp", PriceCents: cents,
		Currency: "USD", EventTime: time.UnixMilli(at)}
}

func cartAdd(cart, sku string, cents, at int64) schemas.CartEvent {
	return schemas.CartEvent{EventID: "c-" + cart, Tenant: "seller-001", CartID: cart, UserID: "u", SKU: sku,
		Action: schemas.CartAdd, Quantity: 1, UnitPriceCents: cents, Currency: "USD", EventTime: time.UnixMilli(at)}
}

// A cart add is checked against the price valid at its own event time:
// an add timed before a price change but processed after it is not an
// alert (a latest-price lookup would flag it), one timed after it is.
// The alert carries the seller's tier from the tenants global table.
func TestPriceCheckUsesThePriceAsOfTheCartAdd(t *testing.T) {
	d := newDriver(t, pipelines.Pricing, pipelines.Config{})
	products, err := schemas.ProductAvro()
	if err != nil {
		t.Fatal(err)
	}
	tenantSerde, err := schemas.TenantAvro()
	if err != nil {
		t.Fatal(err)
	}
	prods := tidemarktest.Input(d, gen.DefaultTopics.Products, serde.String(), products)
	tenants := tidemarktest.Input(d, gen.DefaultTopics.Tenants, serde.String(), tenantSerde)
	carts := tidemarktest.Input(d, gen.DefaultTopics.Carts, serde.String(), schemas.Cart.Avro())
	out := tidemarktest.Output(d, pipelines.DefaultOutputs.PriceAlerts, serde.String(), serde.JSON[pipelines.PriceAlert]())
	pipe := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pipe(tenants.Pipe("seller-001", schemas.TenantEvent{EventID: "t1", Tenant: "seller-001", DisplayName: "One",
		Tier: schemas.TierPremium, EventTime: time.UnixMilli(t0)}, t0))
	pipe(prods.Pipe("sku-1", product("sku-1", 100, t0), t0))
	pipe(prods.Pipe("sku-1", product("sku-1", 120, t0+10_000), t0+10_000))
	for _, c := range []schemas.CartEvent{
		cartAdd("before", "sku-1", 100, t0+9_000), // out of order: priced before the change, correctly
		cartAdd("after", "sku-1", 100, t0+11_000), // the old price after the change: an alert
		cartAdd("fresh", "sku-1", 120, t0+12_000),
	} {
		pipe(carts.Pipe(c.CartID, c, c.EventTime.UnixMilli()))
	}
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := pipelines.PriceAlert{CartID: "after", SKU: "sku-1", Tenant: "seller-001", TenantTier: "premium",
		CartPriceCents: 100, CatalogPriceCents: 120, TimeMs: t0 + 11_000}
	if len(recs) != 1 || recs[0].Value != want {
		t.Fatalf("alerts %+v, want exactly %+v", recs, want)
	}
}
