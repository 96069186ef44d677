package pipelines_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// decodeJSON decodes the JSON value of r, failing the test if it does not
// decode.
func decodeJSON[V any](t *testing.T, r *kgo.Record) V {
	t.Helper()
	var v V
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("decode %s record %s: %v", r.Topic, r.Key, err)
	}
	return v
}

// lastByKey folds records into the latest JSON value per key, skipping
// flush markers.
func lastByKey[V any](t *testing.T, recs []*kgo.Record) map[string]V {
	t.Helper()
	out := map[string]V{}
	for _, r := range recs {
		if strings.HasPrefix(string(r.Key), markerPrefix) {
			continue
		}
		out[string(r.Key)] = decodeJSON[V](t, r)
	}
	return out
}

// The pipelines on the real broker, in a processor.App, produce exactly the
// reference outputs. Inputs are produced before the App starts, so its
// tasks read each topic's partitions in whatever order fetches return
// them: a grace of 30 minutes makes every result independent of that
// order, and the flush markers close every window.
func TestPipelinesMatchReferenceOnKafka(t *testing.T) {
	const parts = 2
	cfg := testConfig()
	cfg.Grace = 30 * time.Minute
	cfg.Inputs = gen.Topics{Clicks: "unused-clicks", Carts: kafkatest.NewTopic(t, parts, nil), Inventory: kafkatest.NewTopic(t, parts, nil),
		Payments: kafkatest.NewTopic(t, parts, nil), Fulfillment: kafkatest.NewTopic(t, parts, nil)}
	cfg.Outputs = pipelines.Outputs{Availability: kafkatest.NewTopic(t, parts, nil), FraudAlerts: kafkatest.NewTopic(t, parts, nil),
		OrderState: kafkatest.NewTopic(t, parts, nil), LateAlerts: kafkatest.NewTopic(t, parts, nil)}
	evs := testStream(3000)
	ref := computeReference(evs, cfg)
	cfg.EnsureDefaults()

	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	add := func(ev gen.Event) { recs = append(recs, kafkaRecord(t, g, ev, parts)) }
	for _, ev := range evs {
		switch ev.Stream {
		case gen.Carts, gen.Inventory, gen.Payments, gen.Fulfillment:
			add(ev)
		}
	}
	kafkatest.Produce(t, recs...)

	// Pricing has its own test (pricing_kafka_test.go).
	topo, err := pipelines.Build(kafkatest.UniqueName(t, "mkt"), []string{pipelines.Inventory, pipelines.Fraud, pipelines.Orders}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	app := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))

	// The markers go in only once the app has consumed every input record:
	// a marker processed before records of another partition would move
	// stream time past them, and they would be dropped as late.
	waitConsumed(t, topo.Application(), topo.SourceTopics())
	recs = recs[:0]
	for _, m := range flushMarkers(ref, cfg, parts) {
		add(gen.Event{Stream: gen.Payments, Value: m})
	}
	kafkatest.Produce(t, recs...)

	t.Run("inventory", func(t *testing.T) {
		kafkatest.ConsumeUntil(t, cfg.Outputs.Availability, time.Minute, func(rs []*kgo.Record) bool {
			got := lastByKey[pipelines.Availability](t, rs)
			return len(got) == len(ref.availability) && fmt.Sprint(got) == fmt.Sprint(ref.availability)
		})
		// The same rows over HTTP, as a storefront would ask.
		for sku, want := range ref.availability {
			var body struct{ Value string }
			getJSON(t, "http://"+app.HTTPAddr()+"/stores/"+pipelines.StoreAvailability+"/keys/"+sku, &body)
			var got pipelines.Availability
			if err := json.Unmarshal([]byte(body.Value), &got); err != nil || got != want {
				t.Fatalf("GET sku %s: %q (%v), want %+v", sku, body.Value, err, want)
			}
			break
		}
	})
	t.Run("fraud", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.FraudAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.alerts) })
		got := map[string]pipelines.FraudAlert{}
		for _, r := range rs {
			a := decodeJSON[pipelines.FraudAlert](t, r)
			got[alertKey(a)] = a
		}
		if len(rs) != len(got) {
			t.Errorf("%d fraud alerts for %d windows: emit-final must emit each window once", len(rs), len(got))
		}
		assertMaps(t, "fraud alerts", got, ref.alerts)
	})
	t.Run("orders", func(t *testing.T) {
		rs := readUntil(t, cfg.Outputs.OrderState, func(rs []*kgo.Record) bool {
			return maps.Equal(lastByKey[pipelines.OrderState](t, rs), ref.orders)
		})
		assertMaps(t, "order state", lastByKey[pipelines.OrderState](t, rs), ref.orders)
		rs = readUntil(t, cfg.Outputs.LateAlerts, func(rs []*kgo.Record) bool { return len(rs) >= len(ref.late) })
		late := lastByKey[pipelines.LateFulfillment](t, rs)
		if len(rs) != len(late) {
			t.Errorf("%d late alerts for %d orders: each must be alerted once", len(rs), len(late))
		}
		assertMaps(t, "late alerts", late, ref.late)
	})
}

// kafkaRecord encodes ev for a topic of partitions partitions, in the
// partition the service's default partitioner picks for its key.
func kafkaRecord(t *testing.T, g *gen.Generator, ev gen.Event, partitions int32) *kgo.Record {
	t.Helper()
	r, err := g.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		Partition: processor.DefaultPartition(r.Key, partitions)}
}

// runApp runs topo on the test broker, with its state in a temporary dir,
// until cleanup, where it deletes the app's internal topics once the app
// has stopped.
func runApp(t *testing.T, topo *topology.Topology, opts ...processor.Option) *processor.App {
	t.Helper()
	t.Cleanup(func() { deleteInternalTopics(t, topo.Application()) })
	app, err := processor.NewApp(topo, append([]processor.Option{
		processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("app did not stop within 30s")
		}
	})
	return app
}

// deleteInternalTopics removes the topics the app created.
func deleteInternalTopics(t *testing.T, app string) {
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		t.Logf("list topics: %v", err)
		return
	}
	var mine []string
	for _, n := range ts.Names() {
		if strings.HasPrefix(n, app+"-") {
			mine = append(mine, n)
		}
	}
	if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
		t.Logf("delete topics of %s: %v", app, err)
	}
}

// waitConsumed waits until the group has committed every record of topics.
// Transactional (repartition) topics end with a commit marker, one offset
// past the last record.
func waitConsumed(t *testing.T, group string, topics []string) {
	t.Helper()
	adm := kafkatest.Admin(t)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err := adm.ListEndOffsets(ctx, topics...)
		var offs kadm.OffsetResponses
		if err == nil {
			offs, err = adm.FetchOffsets(ctx, group)
		}
		cancel()
		behind := 0
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				c, _ := offs.Lookup(o.Topic, o.Partition)
				if c.At < o.Offset-1 || (c.At < o.Offset && !strings.HasSuffix(o.Topic, "-repartition")) {
					behind++
				}
			})
		}
		if err == nil && behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has not consumed its inputs after 1m: %d partitions behind (err %v)", group, behind, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readUntil reads topic read_committed from the start until done holds
// for everything read, or for at most 30 s; the caller's comparison then
// shows what is missing or extra.
func readUntil(t *testing.T, topic string, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	var got []*kgo.Record
	for !done(got) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}
