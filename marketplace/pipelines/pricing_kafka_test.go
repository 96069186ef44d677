package pipelines_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

// tableOf folds records into the latest JSON value per key; a tombstone
// removes the key. Flush markers are kept: the reference has their lines.
func tableOf[V any](t *testing.T, recs []*kgo.Record) map[string]V {
	t.Helper()
	out := map[string]V{}
	for _, r := range recs {
		k := string(r.Key)
		if r.Value == nil {
			delete(out, k)
			continue
		}
		out[k] = decodeJSON[V](t, r)
	}
	return out
}

// The pricing pipeline on the real broker: catalog and activity are
// produced before the App starts, so every price change is in its topic
// before the carts that follow it. A latest-price join would then flag
// every out-of-order cart priced before a change; the versioned table's
// as-of lookup flags exactly the reference's stale prices. The tenants
// global table is restored whole before the first cart is processed, so
// every alert carries a tier.
func TestPricingMatchesReferenceOnKafka(t *testing.T) {
	const parts = 2
	cfg := testConfig()
	cfg.Grace = 30 * time.Minute
	// The flush markers come Grace + a window after the stream: a cart
	// TTL shorter than that would (rightly) expire every line.
	cfg.CartTTL = 2 * time.Hour
	cfg.Inputs = gen.Topics{Clicks: "unused-clicks", Carts: kafkatest.NewTopic(t, parts, nil), Inventory: "unused-inventory",
		Payments: kafkatest.NewTopic(t, parts, nil), Fulfillment: "unused-fulfillment",
		Products: kafkatest.NewTopic(t, parts, nil), Tenants: kafkatest.NewTopic(t, 3, nil)}
	cfg.Outputs = pipelines.Outputs{PriceAlerts: kafkatest.NewTopic(t, parts, nil), CartLines: kafkatest.NewTopic(t, parts, nil),
		CartTotals: kafkatest.NewTopic(t, parts, nil), TenantActivity: kafkatest.NewTopic(t, parts, nil)}
	cfg.EnsureDefaults()
	evs := testStream(4000)
	flush, end := pricingFlush(evs, cfg, parts)
	ref := computePricing(append(evs, flush...), cfg, end)

	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	add := func(ev gen.Event) {
		n := int32(parts)
		if ev.Stream == gen.Tenants {
			n = 3 // a global table's topic need not be co-partitioned with anything
		}
		recs = append(recs, kafkaRecord(t, g, ev, n))
	}
	for _, ev := range evs {
		switch ev.Stream {
		case gen.Carts, gen.Payments, gen.Products, gen.Tenants:
			add(ev)
		}
	}
	kafkatest.Produce(t, recs...)

	topo, err := pipelines.Build(kafkatest.UniqueName(t, "mkt"), []string{pipelines.Pricing}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, topo)
	waitConsumed(t, topo.Application(), topo.SourceTopics())
	recs = recs[:0]
	for _, ev := range flush {
		add(ev)
	}
	kafkatest.Produce(t, recs...)

	t.Run("price alerts", func(t *testing.T) {
		want := map[string]pipelines.PriceAlert{}
		for k, a := range ref.alerts {
			a.TenantTier = ""
			want[k] = a
		}
		rs := readUntil(t, cfg.Outputs.PriceAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
		got := map[string]pipelines.PriceAlert{}
		for _, r := range rs {
			a := decodeJSON[pipelines.PriceAlert](t, r)
			if a.TenantTier == "" {
				t.Errorf("alert %s without a tier: the tenants global table was not restored first", priceAlertKey(a))
			}
			a.TenantTier = ""
			got[priceAlertKey(a)] = a
		}
		if len(rs) != len(got) {
			t.Errorf("%d price alerts for %d distinct adds: each must be alerted once", len(rs), len(got))
		}
		assertMaps(t, "price alerts", got, want)
	})
	checkPricingTables(t, cfg, ref)
}

// checkPricingTables checks the pricing pipeline's cart lines, settled cart
// totals and tenant activity windows (each once) against ref.
func checkPricingTables(t *testing.T, cfg pipelines.Config, ref pricingReference) {
	t.Helper()
	t.Run("cart lines", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.CartLines, func(rs []*kgo.Record) bool {
			return maps.Equal(tableOf[pipelines.PricedLine](t, rs), ref.lines)
		})
		assertMaps(t, "cart lines", tableOf[pipelines.PricedLine](t, rs), ref.lines)
	})
	t.Run("cart totals", func(t *testing.T) {
		want := map[string]pipelines.CartTotal{}
		for cart := range ref.settled {
			if tot, ok := ref.totals[cart]; ok {
				want[cart] = tot
			}
		}
		settled := func(rs []*kgo.Record) map[string]pipelines.CartTotal {
			got := tableOf[pipelines.CartTotal](t, rs)
			for cart, tot := range got {
				if !ref.settled[cart] || tot == (pipelines.CartTotal{}) {
					delete(got, cart)
				}
			}
			return got
		}
		rs := readUntil(t, cfg.Outputs.CartTotals, func(rs []*kgo.Record) bool { return maps.Equal(settled(rs), want) })
		assertMaps(t, "cart totals", settled(rs), want)
	})
	t.Run("tenant activity", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.TenantActivity, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.activity) })
		got := map[string]pipelines.TenantActivity{}
		for _, r := range rs {
			if strings.HasPrefix(string(r.Key), markerPrefix) {
				continue
			}
			a := decodeJSON[pipelines.TenantActivity](t, r)
			if _, dup := got[activityKey(a)]; dup {
				t.Errorf("window %s emitted twice", activityKey(a))
			}
			got[activityKey(a)] = a
		}
		assertMaps(t, "tenant activity", got, ref.activity)
	})
}
