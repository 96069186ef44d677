package pipelines_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
)

// Started on a backlog (30 s of the generator's 2,000 events/s, produced
// before the App starts, 2 partitions), the pricing pipeline with its
// default 5 s grace gives the results it gives live: the input's disorder
// (2 s) is within the grace, and the tenant-activity windows (a cogroup of
// cart adds and captures, each re-keyed by tenant) drop nothing as late and
// count every add and capture.
//
// The fraud pipeline runs beside it and is only reported on: its velocity
// windows are behind a re-key, and started on a backlog the payments tasks
// that write to the repartition topic do not work it off in step, so a few
// dozen attempts are dropped as late and their alerts are missing (README,
// "This does not reach across a repartition topic"; Kafka Streams has the
// same limitation). With the CLI's 6 partitions the tenant-activity windows
// drop records too (README).
func TestPipelinesStartedOnBacklogMatchReferenceOnKafka(t *testing.T) {
	const parts = 2
	cfg := pipelines.Config{FraudThreshold: 3, CartTTL: 2 * time.Hour}
	cfg.Inputs = gen.Topics{Clicks: "unused-clicks", Carts: kafkatest.NewTopic(t, parts, nil), Inventory: "unused-inventory",
		Payments: kafkatest.NewTopic(t, parts, nil), Fulfillment: "unused-fulfillment",
		Products: kafkatest.NewTopic(t, parts, nil), Tenants: kafkatest.NewTopic(t, 3, nil)}
	cfg.Outputs = pipelines.Outputs{PriceAlerts: kafkatest.NewTopic(t, parts, nil), CartLines: kafkatest.NewTopic(t, parts, nil),
		CartTotals: kafkatest.NewTopic(t, parts, nil), TenantActivity: kafkatest.NewTopic(t, parts, nil),
		FraudAlerts: kafkatest.NewTopic(t, parts, nil)}
	cfg.EnsureDefaults()

	start := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	src, err := gen.New(gen.Config{Seed: 11, Start: start, Profile: gen.Profile{Rate: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	evs := src.Take(60_000)
	flush, end := pricingFlush(evs, cfg, parts)
	pricing := computePricing(append(evs, flush...), cfg, end)
	fraud := computeReference(evs, cfg)

	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	add := func(ev gen.Event) {
		n := int32(parts)
		if ev.Stream == gen.Tenants {
			n = 3
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
	t.Logf("produced %d records over %v of event time before the start", len(recs), evs[len(evs)-1].Time().Sub(evs[0].Time()))

	topo, err := pipelines.Build(kafkatest.UniqueName(t, "mkt"), []string{pipelines.Pricing, pipelines.Fraud}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	app := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	waitConsumed(t, topo.Application(), topo.SourceTopics())
	if n := droppedLate(t, app, pipelines.StoreTenantActivity); n != 0 {
		t.Errorf("tenant activity: %v records dropped as late from input in event-time order within the grace", n)
	}

	// Close every window: the pricing markers (tenant activity), then,
	// once they are processed, the fraud markers, later in event time.
	recs = recs[:0]
	for _, ev := range flush {
		add(ev)
	}
	kafkatest.Produce(t, recs...)
	waitConsumed(t, topo.Application(), topo.SourceTopics())
	recs = recs[:0]
	for _, m := range flushMarkers(fraud, cfg, parts) {
		add(gen.Event{Stream: gen.Payments, Value: m})
	}
	kafkatest.Produce(t, recs...)

	t.Run("tenant activity", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.TenantActivity, func(rs []*kgo.Record) bool { return len(rs) >= len(pricing.activity) })
		got := map[string]pipelines.TenantActivity{}
		for _, r := range rs {
			if k := string(r.Key); strings.HasPrefix(k, markerPrefix) || k == "flush" {
				continue
			}
			a := decodeJSON[pipelines.TenantActivity](t, r)
			got[activityKey(a)] = a
		}
		assertMaps(t, "tenant activity", got, pricing.activity)
	})
	t.Run("fraud", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.FraudAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(fraud.alerts) })
		got := map[string]pipelines.FraudAlert{}
		for _, r := range rs {
			a := decodeJSON[pipelines.FraudAlert](t, r)
			got[alertKey(a)] = a
		}
		missing := 0
		for k := range fraud.alerts {
			if _, ok := got[k]; !ok {
				missing++
			}
		}
		t.Logf("payment velocity (known limitation, not asserted): %v attempts dropped as late, %d of %d alerts missing",
			droppedLate(t, app, pipelines.StoreVelocity), missing, len(fraud.alerts))
	})
	if n := droppedLate(t, app, pipelines.StoreTenantActivity); n != 0 {
		t.Errorf("tenant activity: %v records dropped as late in all", n)
	}
}

// droppedLate sums the app's tidemark_dropped_records_total{reason="late"}
// of the operator node.
func droppedLate(t *testing.T, app *processor.App, node string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+app.HTTPAddr()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "tidemark_dropped_records_total{") || !strings.Contains(line, `reason="late"`) ||
			!strings.Contains(line, `node="`+node+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if v > 0 {
			t.Logf("%s", line)
		}
		n += v
	}
	return n
}
