package pipelines_test

import (
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
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

	topo, err := pipelines.Build("mkt", []string{pipelines.Pricing}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	g, err := gen.New(gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tidemarktest.InputTopic[[]byte, []byte]{}
	for _, topic := range []string{cfg.Inputs.Carts, cfg.Inputs.Payments, cfg.Inputs.Products, cfg.Inputs.Tenants} {
		in[topic] = tidemarktest.Input(d, topic, serde.Bytes(), serde.Bytes())
	}
	for _, ev := range all {
		rec, err := g.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		topic, ok := in[rec.Topic]
		if !ok {
			continue // clicks, inventory, fulfillment: not read by pricing
		}
		if err := topic.Pipe(rec.Key, rec.Value, rec.Timestamp.UnixMilli()); err != nil {
			t.Fatalf("pipe event %d (%s): %v", ev.Seq, ev.Stream, err)
		}
	}

	t.Run("price alerts from the as-of price, with the seller's tier", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.PriceAlerts, serde.String(), serde.JSON[pipelines.PriceAlert]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]pipelines.PriceAlert{}
		for _, r := range out {
			k := priceAlertKey(r.Value)
			if _, dup := got[k]; dup {
				t.Errorf("price alert %s emitted twice", k)
			}
			got[k] = r.Value
		}
		assertMaps(t, cfg.Outputs.PriceAlerts, got, ref.alerts)
	})
	t.Run("cart lines priced by foreign key at the current price", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.CartLines, serde.String(), serde.JSON[pipelines.PricedLine]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]pipelines.PricedLine{}
		for _, r := range out {
			if r.Tombstone {
				delete(got, r.Key)
				continue
			}
			got[r.Key] = r.Value
		}
		assertMaps(t, cfg.Outputs.CartLines, got, ref.lines)
	})
	t.Run("cart totals, suppressed to one per interval", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.CartTotals, serde.String(), serde.JSON[pipelines.CartTotal]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got, want := map[string]pipelines.CartTotal{}, map[string]pipelines.CartTotal{}
		for _, r := range out {
			if r.Tombstone {
				delete(got, r.Key)
				continue
			}
			got[r.Key] = r.Value
		}
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
		got := map[string]pipelines.TenantActivity{}
		for _, r := range out {
			if strings.HasPrefix(r.Key, markerPrefix) {
				continue
			}
			k := activityKey(r.Value)
			if _, dup := got[k]; dup {
				t.Errorf("tenant window %s emitted twice: emit-final must emit once", k)
			}
			got[k] = r.Value
		}
		assertMaps(t, cfg.Outputs.TenantActivity, got, ref.activity)
	})
}
