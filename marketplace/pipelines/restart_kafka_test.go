package pipelines_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/topology"
)

// startApp runs topo with its state in dir until the returned stop is
// called; stop waits for Run to return and fails the test on its error.
func startApp(t *testing.T, topo *topology.Topology, dir string) (stop func()) {
	t.Helper()
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("app did not stop within 60s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// onceCase is the input of an exactly-once test of the inventory, fraud
// and orders pipelines on the real broker, and what to check against.
type onceCase struct {
	parts     int32
	cfg       pipelines.Config
	ref       reference
	updates   map[string]int // order-state records per order id
	invEvents map[string]int // inventory events per sku
	recs      []*kgo.Record  // the input, in the generator's order
	markers   []*kgo.Record  // flush markers, produced once every input is consumed
	topo      *topology.Topology
}

// newOnceCase creates the topics of a test of the inventory, fraud and
// orders pipelines with n events, and their topology (application id
// prefixed prefix).
func newOnceCase(t *testing.T, prefix string, n int) onceCase {
	t.Helper()
	const parts = 2
	cfg := testConfig()
	cfg.Grace = 30 * time.Minute
	cfg.Inputs = gen.Topics{Clicks: "unused-clicks", Carts: kafkatest.NewTopic(t, parts, nil), Inventory: kafkatest.NewTopic(t, parts, nil),
		Payments: kafkatest.NewTopic(t, parts, nil), Fulfillment: kafkatest.NewTopic(t, parts, nil)}
	cfg.Outputs = pipelines.Outputs{Availability: kafkatest.NewTopic(t, parts, nil), FraudAlerts: kafkatest.NewTopic(t, parts, nil),
		OrderState: kafkatest.NewTopic(t, parts, nil), LateAlerts: kafkatest.NewTopic(t, parts, nil)}
	evs := testStream(n)
	c := onceCase{parts: parts, ref: computeReference(evs, cfg), updates: map[string]int{}, invEvents: map[string]int{}}
	cfg.EnsureDefaults()
	c.cfg = cfg

	// Updates per order, counted from the events: every payment and
	// fulfillment event, and the cart lines of its checkout join.
	for _, ev := range evs {
		switch v := ev.Value.(type) {
		case schemas.PaymentEvent:
			c.updates[v.OrderID]++
		case schemas.FulfillmentEvent:
			c.updates[v.OrderID]++
		case schemas.InventoryEvent:
			c.invEvents[v.SKU]++
		}
	}
	for id, o := range c.ref.orders {
		c.updates[id] += int(o.CartEvents)
	}

	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		switch ev.Stream {
		case gen.Carts, gen.Inventory, gen.Payments, gen.Fulfillment:
			c.recs = append(c.recs, kafkaRecord(t, g, ev, parts))
		}
	}
	for _, m := range flushMarkers(c.ref, cfg, parts) {
		c.markers = append(c.markers, kafkaRecord(t, g, gen.Event{Stream: gen.Payments, Value: m}, parts))
	}
	c.topo, err = pipelines.Build(kafkatest.UniqueName(t, prefix), []string{pipelines.Inventory, pipelines.Fraud, pipelines.Orders}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteInternalTopics(t, c.topo.Application()) })
	return c
}

// check reads the outputs, once the markers are in, and checks that every
// output was written exactly once: each sku's availability records count
// its events 1, 2, …, n with none repeated or skipped, each order gets one
// order-state record per update, each fraud window and late capture one
// alert, and the final values are the reference's.
func (c onceCase) check(t *testing.T) {
	cfg, ref := c.cfg, c.ref
	t.Run("inventory", func(t *testing.T) {
		want := 0
		for _, n := range c.invEvents {
			want += n
		}
		rs := readUntil(t, cfg.Outputs.Availability, func(rs []*kgo.Record) bool { return len(rs) >= want })
		seen := map[string]int64{}
		for _, r := range rs {
			a := decodeJSON[pipelines.Availability](t, r)
			if a.Events != seen[a.SKU]+1 {
				t.Errorf("sku %s: record with events=%d after %d: an update repeated or lost", a.SKU, a.Events, seen[a.SKU])
			}
			seen[a.SKU] = a.Events
		}
		if len(rs) != want {
			t.Errorf("%d availability records, want %d (one per inventory event)", len(rs), want)
		}
		assertMaps(t, "availability", lastByKey[pipelines.Availability](t, rs), ref.availability)
	})
	t.Run("fraud", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.FraudAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.alerts) })
		time.Sleep(2 * time.Second)
		rs = readUntil(t, cfg.Outputs.FraudAlerts, func(got []*kgo.Record) bool { return len(got) >= len(rs) })
		got := map[string]pipelines.FraudAlert{}
		for _, r := range rs {
			a := decodeJSON[pipelines.FraudAlert](t, r)
			if _, dup := got[alertKey(a)]; dup {
				t.Errorf("fraud alert %s emitted twice", alertKey(a))
			}
			got[alertKey(a)] = a
		}
		assertMaps(t, "fraud alerts", got, ref.alerts)
	})
	t.Run("orders", func(t *testing.T) {
		want := 0
		for _, n := range c.updates {
			want += n
		}
		rs := readUntil(t, cfg.Outputs.OrderState, func(rs []*kgo.Record) bool { return len(rs) >= want+2*int(c.parts) })
		count := map[string]int{}
		for _, r := range rs {
			count[string(r.Key)]++
		}
		for id, n := range c.updates {
			if count[id] != n {
				t.Errorf("order %s: %d order-state records, want %d (one per update)", id, count[id], n)
			}
		}
		assertMaps(t, "order state", lastByKey[pipelines.OrderState](t, rs), ref.orders)
		rs = readUntil(t, cfg.Outputs.LateAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.late) })
		late := lastByKey[pipelines.LateFulfillment](t, rs)
		if len(rs) != len(late) {
			t.Errorf("%d late alerts for %d orders: each must be alerted once", len(rs), len(late))
		}
		assertMaps(t, "late alerts", late, ref.late)
	})
}

// The pipelines stopped and started again midway, once on the same state
// directory and once on a fresh one (restoring from the changelogs), write
// every output exactly once (onceCase.check).
func TestPipelinesExactlyOnceAcrossRestartsOnKafka(t *testing.T) {
	c := newOnceCase(t, "mktr", 3000)
	dir := t.TempDir()
	recs := c.recs
	third := len(recs) / 3
	steps := []struct {
		name string
		dir  string
		recs []*kgo.Record
	}{
		{"first run", dir, recs[:third]},
		{"restart on the same state dir", dir, recs[third : 2*third]},
		{"restart on a fresh state dir", t.TempDir(), recs[2*third:]},
	}
	var stop func()
	for _, s := range steps {
		t.Logf("%s: %d input records", s.name, len(s.recs))
		kafkatest.Produce(t, s.recs...)
		stop = startApp(t, c.topo, s.dir)
		waitConsumed(t, c.topo.Application(), c.topo.SourceTopics())
		if s.name != steps[len(steps)-1].name {
			stop()
		}
	}
	kafkatest.Produce(t, c.markers...)
	c.check(t)
}

// pricingCase is the input of an exactly-once test of the pricing
// pipeline on the real broker, and what to check against.
type pricingCase struct {
	cfg   pipelines.Config
	ref   pricingReference
	recs  []*kgo.Record // the input, in the generator's order
	flush []*kgo.Record // pricingFlush's events, produced once every input is consumed
	topo  *topology.Topology
}

// newPricingCase creates the topics of a test of the pricing pipeline with
// n events, and its topology (application id prefixed prefix).
func newPricingCase(t *testing.T, prefix string, n int) pricingCase {
	t.Helper()
	const parts = 2
	cfg := testConfig()
	cfg.Grace = 30 * time.Minute
	cfg.CartTTL = 2 * time.Hour
	cfg.Inputs = gen.Topics{Clicks: "unused-clicks", Carts: kafkatest.NewTopic(t, parts, nil), Inventory: "unused-inventory",
		Payments: kafkatest.NewTopic(t, parts, nil), Fulfillment: "unused-fulfillment",
		Products: kafkatest.NewTopic(t, parts, nil), Tenants: kafkatest.NewTopic(t, 3, nil)}
	cfg.Outputs = pipelines.Outputs{PriceAlerts: kafkatest.NewTopic(t, parts, nil), CartLines: kafkatest.NewTopic(t, parts, nil),
		CartTotals: kafkatest.NewTopic(t, parts, nil), TenantActivity: kafkatest.NewTopic(t, parts, nil)}
	cfg.EnsureDefaults()
	evs := testStream(n)
	flush, end := pricingFlush(evs, cfg, parts)
	c := pricingCase{cfg: cfg, ref: computePricing(append(evs, flush...), cfg, end)}

	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	encode := func(evs []gen.Event) []*kgo.Record {
		var recs []*kgo.Record
		for _, ev := range evs {
			n := int32(parts)
			switch ev.Stream {
			case gen.Tenants:
				n = 3
			case gen.Carts, gen.Payments, gen.Products:
			default:
				continue
			}
			recs = append(recs, kafkaRecord(t, g, ev, n))
		}
		return recs
	}
	c.recs, c.flush = encode(evs), encode(flush)
	c.topo, err = pipelines.Build(kafkatest.UniqueName(t, prefix), []string{pipelines.Pricing}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteInternalTopics(t, c.topo.Application()) })
	return c
}

// check reads the outputs, once the flush events are in: alerts are
// emitted once, with a tier, and the lines, settled totals and activity
// windows are the reference's.
func (c pricingCase) check(t *testing.T) {
	cfg, ref := c.cfg, c.ref
	t.Run("price alerts", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.PriceAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.alerts) })
		want := map[string]pipelines.PriceAlert{}
		for k, a := range ref.alerts {
			a.TenantTier = ""
			want[k] = a
		}
		got := map[string]pipelines.PriceAlert{}
		for _, r := range rs {
			a := decodeJSON[pipelines.PriceAlert](t, r)
			if a.TenantTier == "" {
				t.Errorf("alert %s without a tier", priceAlertKey(a))
			}
			a.TenantTier = ""
			if _, dup := got[priceAlertKey(a)]; dup {
				t.Errorf("price alert %s emitted twice", priceAlertKey(a))
			}
			got[priceAlertKey(a)] = a
		}
		assertMaps(t, "price alerts", got, want)
	})
	checkPricingTables(t, cfg, ref)
}

// The pricing pipeline stopped and started twice midway, the second time
// on a fresh state directory (the versioned prices, TTL'd lines, the
// foreign-key join's stores and the suppress buffer restore from their
// changelogs, the tenants global table from its topic): alerts are
// emitted once, with a tier, and the lines, settled totals and activity
// windows are the reference's.
func TestPricingExactlyOnceAcrossRestartsOnKafka(t *testing.T) {
	c := newPricingCase(t, "mktr", 4000)
	recs := c.recs
	dir := t.TempDir()
	third := len(recs) / 3
	for i, s := range []struct {
		dir  string
		recs []*kgo.Record
	}{{dir, recs[:third]}, {dir, recs[third : 2*third]}, {t.TempDir(), recs[2*third:]}} {
		kafkatest.Produce(t, s.recs...)
		stop := startApp(t, c.topo, s.dir)
		waitConsumed(t, c.topo.Application(), c.topo.SourceTopics())
		if i < 2 {
			stop()
		}
	}
	kafkatest.Produce(t, c.flush...)
	c.check(t)
}
