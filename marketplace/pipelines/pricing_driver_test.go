package pipelines_test

import (
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
)

// TestPricingMatchesReferenceInDriver runs the pricing pipeline (versioned
// as-of join, global table, TTL aggregate, foreign-key join, suppress,
// cogroup) over a generated stream with price and tier changes and stale
// cart prices, and compares every output with the reference.
func TestPricingMatchesReferenceInDriver(t *testing.T) {
	cfg := testConfig()
	cfg.EnsureDefaults()
	evs := testStream(4000)
	flush, end := pricingFlush(evs, cfg, 2)
	all := append(evs, flush...)
	ref := computePricing(all, cfg, end)
	if len(ref.alerts) == 0 || len(ref.lines) == 0 || len(ref.settled) == 0 || len(ref.activity) == 0 {
		t.Fatalf("test stream too thin: %d price alerts, %d cart lines, %d settled carts, %d activity windows",
			len(ref.alerts), len(ref.lines), len(ref.settled), len(ref.activity))
	}
	t.Logf("reference: %d price alerts, %d cart lines, %d carts (%d settled), %d tenant windows",
		len(ref.alerts), len(ref.lines), len(ref.totals), len(ref.settled), len(ref.activity))

	d, pipe := streamDriver(t, []string{pipelines.Pricing}, cfg,
		cfg.Inputs.Carts, cfg.Inputs.Payments, cfg.Inputs.Products, cfg.Inputs.Tenants)
	for _, ev := range all {
		pipe(ev) // clicks, inventory, fulfillment are not read by pricing: not piped
	}

	t.Run("price alerts from the as-of price, with the seller's tier", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.PriceAlerts, serde.String(), serde.JSON[pipelines.PriceAlert]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := emittedOnce(t, "price alert", out, func(_ string, a pipelines.PriceAlert) (string, bool) { return priceAlertKey(a), true })
		assertMaps(t, cfg.Outputs.PriceAlerts, got, ref.alerts)
	})
	t.Run("cart lines priced by foreign key at the current price", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.CartLines, serde.String(), serde.JSON[pipelines.PricedLine]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := outputTable(out)
		assertMaps(t, cfg.Outputs.CartLines, got, ref.lines)
	})
	t.Run("cart totals, suppressed to one per interval", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.CartTotals, serde.String(), serde.JSON[pipelines.CartTotal]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got, want := outputTable(out), map[string]pipelines.CartTotal{}
		for cart := range ref.settled {
			if tot, ok := ref.totals[cart]; ok {
				want[cart] = tot
			}
		}
		for cart, tot := range got {
			// An emptied cart keeps a zero total (the aggregate
			// subtracts its lines); the reference has no row for it.
			if !ref.settled[cart] || tot == (pipelines.CartTotal{}) {
				delete(got, cart)
			}
		}
		assertMaps(t, cfg.Outputs.CartTotals, got, want)
		if len(out) >= len(all) {
			t.Errorf("%d cart totals for %d input events: suppress should emit fewer", len(out), len(all))
		}
	})
	t.Run("tenant activity cogrouped from carts and payments", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.TenantActivity, serde.String(), serde.JSON[pipelines.TenantActivity]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := emittedOnce(t, "tenant window (emit-final emits each once)", out, func(k string, a pipelines.TenantActivity) (string, bool) {
			return activityKey(a), !strings.HasPrefix(k, markerPrefix)
		})
		assertMaps(t, cfg.Outputs.TenantActivity, got, ref.activity)
	})
}
