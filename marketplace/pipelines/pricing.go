package pipelines

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// PriceAlert is a cart add whose unit price differs from the catalog price
// valid at the add's event time (a shopper on a stale page, a bug in a
// storefront). Key: sku.
type PriceAlert struct {
	CartID            string `json:"cart_id"`
	SKU               string `json:"sku"`
	Tenant            string `json:"tenant"`
	TenantTier        string `json:"tenant_tier"` // "" when the seller is unknown
	CartPriceCents    int64  `json:"cart_price_cents"`
	CatalogPriceCents int64  `json:"catalog_price_cents"`
	TimeMs            int64  `json:"time_ms"`
}

// PricedLine is one sku in one cart, priced at the sku's current catalog
// price. Key: LineKey(cart, sku).
type PricedLine struct {
	CartID         string `json:"cart_id"`
	SKU            string `json:"sku"`
	Title          string `json:"title"`
	Quantity       int64  `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
	TotalCents     int64  `json:"total_cents"`
}

// CartTotal sums a cart's priced lines. Key: cart id.
type CartTotal struct {
	Lines      int64 `json:"lines"`
	Units      int64 `json:"units"`
	TotalCents int64 `json:"total_cents"`
}

// TenantActivity is one seller's activity in one window: cart adds from
// the carts topic and captured payments from the payments topic,
// aggregated together (a cogroup). Key: tenant.
type TenantActivity struct {
	Tenant        string `json:"tenant"`
	CartAdds      int64  `json:"cart_adds"`
	UnitsAdded    int64  `json:"units_added"`
	Captures      int64  `json:"captures"`
	CapturedCents int64  `json:"captured_cents"`
	WindowStartMs int64  `json:"window_start_ms"`
	WindowEndMs   int64  `json:"window_end_ms"` // exclusive
}

// LineQuantity is the running quantity of one cart line (the StoreCartLines
// aggregate).
type LineQuantity struct {
	CartID   string `json:"cart_id"`
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// LineKey is the key of a cart line: "<cart id>/<sku>".
func LineKey(cart, sku string) string { return cart + "/" + sku }

// Apply adds (or, for a remove, subtracts) a cart event to its line.
func (l LineQuantity) Apply(c schemas.CartEvent) LineQuantity {
	l.CartID, l.SKU = c.CartID, c.SKU
	if c.Action == schemas.CartRemove {
		l.Quantity -= int64(c.Quantity)
	} else {
		l.Quantity += int64(c.Quantity)
	}
	return l
}

// addPricing adds the catalog pipeline, one DSL operator per business rule:
//
//	Inputs.Products (key sku) → versioned table StorePrices (history PriceHistory)
//	Inputs.Tenants (key tenant) → global table StoreTenants on every instance
//
//	price check: cart adds → re-key by sku (repartition) → as-of join with StorePrices
//	  (the price valid at the add's event time, not the latest) → mismatches
//	  → left join with the tenants global table by the add's tenant (the seller's tier)
//	  → Outputs.PriceAlerts (key sku, PriceAlert JSON)
//	cart lines: cart events → grouped by LineKey (repartition) → running quantity
//	  StoreCartLines, expiring CartTTL of event time after the line's last change
//	  → lines with quantity > 0 → foreign-key join to StorePrices by sku (the current price)
//	  → Outputs.CartLines (key LineKey, PricedLine JSON; a tombstone when a line
//	  empties or expires)
//	cart totals: priced lines → grouped by cart id → sum StoreCartTotals
//	  → suppressed: each cart's total at most once per CartTotalsEvery of event time
//	  → Outputs.CartTotals (key cart id, CartTotal JSON)
//	tenant activity: cart adds by tenant, captured payments by tenant → cogrouped in
//	  tumbling windows TenantActivityWindow, grace Grace, store StoreTenantActivity,
//	  emit-final → Outputs.TenantActivity (key tenant, TenantActivity JSON)
func addPricing(b *topology.Builder, in inputs, cfg Config) error {
	products, tenantEvents := in.vs.Product, in.vs.Tenant
	var err error
	if products == nil {
		if products, err = schemas.ProductAvro(); err != nil {
			return fmt.Errorf("pipelines: pricing: %w", err)
		}
	}
	if tenantEvents == nil {
		if tenantEvents, err = schemas.TenantAvro(); err != nil {
			return fmt.Errorf("pipelines: pricing: %w", err)
		}
	}
	prices := b.Table(cfg.Inputs.Products, serde.String(), products, topology.Versioned(cfg.PriceHistory),
		topology.Named(StorePrices))
	tenants := b.GlobalTable(cfg.Inputs.Tenants, serde.String(), tenantEvents, topology.Named(StoreTenants))
	adds := in.carts.Filter(func(_ string, c schemas.CartEvent) bool { return c.Action == schemas.CartAdd },
		topology.Named("cart-adds"))

	adds.SelectKey(func(_ string, c schemas.CartEvent) string { return c.SKU }, topology.Named("cart-add-sku")).
		JoinTable(prices, func(sku string, c schemas.CartEvent, p schemas.ProductEvent) PriceAlert {
			return PriceAlert{CartID: c.CartID, SKU: sku, Tenant: c.Tenant, CartPriceCents: c.UnitPriceCents,
				CatalogPriceCents: p.PriceCents, TimeMs: c.EventTime.UnixMilli()}
		}, topology.Named("price-check")).
		Filter(func(_ string, a PriceAlert) bool { return a.CartPriceCents != a.CatalogPriceCents },
			topology.Named("price-mismatch")).
		LeftJoinGlobal(tenants, func(_ string, a PriceAlert) string { return a.Tenant },
			func(_ string, a PriceAlert, t schemas.TenantEvent, found bool) PriceAlert {
				if found {
					a.TenantTier = string(t.Tier)
				}
				return a
			}, topology.Named("price-alert-tenant")).
		WithSerdes(serde.String(), serde.JSON[PriceAlert]()).
		To(cfg.Outputs.PriceAlerts, topology.Named("price-alerts-sink"))

	lines := in.carts.
		GroupBy(func(_ string, c schemas.CartEvent) string { return LineKey(c.CartID, c.SKU) }, serde.String(),
			topology.Named("cart-events-by-line")).
		Aggregate(func() LineQuantity { return LineQuantity{} },
			func(_ string, c schemas.CartEvent, l LineQuantity) LineQuantity { return l.Apply(c) },
			serde.JSON[LineQuantity](), topology.Named(StoreCartLines), topology.WithTTL(cfg.CartTTL)).
		Filter(func(_ string, l LineQuantity) bool { return l.Quantity > 0 }, topology.Named("cart-lines-nonempty"))
	priced := lines.JoinOnForeignKey(prices,
		func(_ string, l LineQuantity) (string, bool) { return l.SKU, true },
		func(_ string, l LineQuantity, p schemas.ProductEvent) PricedLine {
			return PricedLine{CartID: l.CartID, SKU: l.SKU, Title: p.Title, Quantity: l.Quantity,
				UnitPriceCents: p.PriceCents, TotalCents: l.Quantity * p.PriceCents}
		}, topology.Named(StoreCartLinePrices))
	priced.ToStream(topology.Named("cart-line-changes")).
		WithSerdes(serde.String(), serde.JSON[PricedLine]()).
		To(cfg.Outputs.CartLines, topology.Named("cart-lines-sink"))

	priced.GroupBy(func(_ string, l PricedLine) (string, PricedLine) { return l.CartID, l }, serde.String(), serde.JSON[PricedLine](),
		topology.Named("cart-lines-by-cart")).
		Aggregate(func() CartTotal { return CartTotal{} },
			func(_ string, l PricedLine, t CartTotal) CartTotal {
				return CartTotal{Lines: t.Lines + 1, Units: t.Units + l.Quantity, TotalCents: t.TotalCents + l.TotalCents}
			},
			func(_ string, l PricedLine, t CartTotal) CartTotal {
				return CartTotal{Lines: t.Lines - 1, Units: t.Units - l.Quantity, TotalCents: t.TotalCents - l.TotalCents}
			}, serde.JSON[CartTotal](), topology.Named(StoreCartTotals)).
		Suppress(topology.UntilTimeLimit(cfg.CartTotalsEvery, topology.BufferConfig{MaxRecords: 100_000}),
			topology.Named(StoreCartTotalsBuffer)).
		ToStream(topology.Named("cart-total-changes")).
		WithSerdes(serde.String(), serde.JSON[CartTotal]()).
		To(cfg.Outputs.CartTotals, topology.Named("cart-totals-sink"))

	addsByTenant := adds.GroupBy(func(_ string, c schemas.CartEvent) string { return c.Tenant }, serde.String(),
		topology.Named("cart-adds-by-tenant"))
	capturesByTenant := in.payments.
		Filter(func(_ string, p schemas.PaymentEvent) bool { return p.Status == schemas.PaymentCaptured },
			topology.Named("payment-captures")).
		GroupBy(func(_ string, p schemas.PaymentEvent) string { return p.Tenant }, serde.String(),
			topology.Named("captures-by-tenant"))
	activity := addsByTenant.Cogroup(func(tenant string, c schemas.CartEvent, a TenantActivity) TenantActivity {
		a.Tenant = tenant
		a.CartAdds++
		a.UnitsAdded += int64(c.Quantity)
		return a
	}).Cogroup(capturesByTenant, func(tenant string, p schemas.PaymentEvent, a TenantActivity) TenantActivity {
		a.Tenant = tenant
		a.Captures++
		a.CapturedCents += p.AmountCents
		return a
	})
	topology.CogroupWindowedBy(activity, topology.TumblingWindows(cfg.TenantActivityWindow, cfg.Grace)).
		Aggregate(func() TenantActivity { return TenantActivity{} }, serde.JSON[TenantActivity](),
			topology.Named(StoreTenantActivity), topology.EmitFinal()).
		ToStream(topology.Named("tenant-activity-final")).
		Map(func(w topology.Windowed[string], a TenantActivity) (string, TenantActivity) {
			a.Tenant, a.WindowStartMs, a.WindowEndMs = w.Key, w.Start, w.End
			return w.Key, a
		}, topology.Named("tenant-activity-window")).
		WithSerdes(serde.String(), serde.JSON[TenantActivity]()).
		To(cfg.Outputs.TenantActivity, topology.Named("tenant-activity-sink"))
	return nil
}
