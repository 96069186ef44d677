package pipelines_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
)

// streamDriver builds the named pipelines (nil: all) into the broker-free
// driver, closed at cleanup. Its pipe encodes an event and pipes it to its
// topic, one of inputs; for an event of another topic it pipes nothing and
// returns false.
func streamDriver(t *testing.T, names []string, cfg pipelines.Config, inputs ...string) (d *tidemarktest.Driver, pipe func(gen.Event) bool) {
	t.Helper()
	topo, err := pipelines.Build("mkt", names, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err = tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	g, err := gen.New(gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tidemarktest.InputTopic[[]byte, []byte]{}
	for _, topic := range inputs {
		in[topic] = tidemarktest.Input(d, topic, serde.Bytes(), serde.Bytes())
	}
	pipe = func(ev gen.Event) bool {
		rec, err := g.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		topic, ok := in[rec.Topic]
		if !ok {
			return false
		}
		if err := topic.Pipe(rec.Key, rec.Value, rec.Timestamp.UnixMilli()); err != nil {
			t.Fatalf("pipe event %d (%s): %v", ev.Seq, ev.Stream, err)
		}
		return true
	}
	return d, pipe
}

// runDriver pipes the events (and flush markers) through all pipelines in
// the broker-free driver.
func runDriver(t *testing.T, evs []gen.Event, cfg pipelines.Config, ref reference) *tidemarktest.Driver {
	t.Helper()
	d, pipe := streamDriver(t, nil, cfg, cfg.Inputs.Carts, cfg.Inputs.Inventory, cfg.Inputs.Payments, cfg.Inputs.Fulfillment,
		cfg.Inputs.Products, cfg.Inputs.Tenants)
	mustPipe := func(ev gen.Event) {
		if !pipe(ev) {
			t.Fatalf("event %d (%s): its topic is not an input of the pipelines", ev.Seq, ev.Stream)
		}
	}
	for _, ev := range evs {
		if ev.Stream != gen.Clicks { // no pipeline reads clicks
			mustPipe(ev)
		}
	}
	for _, m := range flushMarkers(ref, cfg, 2) {
		mustPipe(gen.Event{Stream: gen.Payments, Value: m})
	}
	return d
}

func TestPipelinesMatchReferenceInDriver(t *testing.T) {
	cfg := testConfig()
	evs := testStream(3000)
	ref := computeReference(evs, cfg)
	if len(ref.alerts) == 0 || len(ref.late) == 0 || len(ref.orders) == 0 {
		t.Fatalf("test stream too thin: %d fraud alerts, %d late alerts, %d orders", len(ref.alerts), len(ref.late), len(ref.orders))
	}
	t.Logf("reference: %d skus, %d fraud alerts, %d orders, %d late alerts", len(ref.availability), len(ref.alerts), len(ref.orders), len(ref.late))
	cfg.EnsureDefaults()
	d := runDriver(t, evs, cfg, ref)

	t.Run("inventory table and its changelog stream", func(t *testing.T) {
		rows, err := tidemarktest.ReadStore(d, pipelines.StoreAvailability, serde.String(), pipelines.AvailabilitySerde())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]pipelines.Availability{}
		for _, r := range rows {
			got[r.Key] = r.Value
		}
		assertMaps(t, "store "+pipelines.StoreAvailability, got, ref.availability)
		out, err := tidemarktest.Output(d, cfg.Outputs.Availability, serde.String(), pipelines.AvailabilitySerde()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		last := map[string]pipelines.Availability{}
		for _, r := range out {
			last[r.Key] = r.Value
		}
		assertMaps(t, "last record per sku on "+cfg.Outputs.Availability, last, ref.availability)
	})
	t.Run("fraud alerts once per window over the threshold", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.FraudAlerts, serde.String(), serde.JSON[pipelines.FraudAlert]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := emittedOnce(t, "fraud alert (emit-final emits each window once)", out, func(_ string, a pipelines.FraudAlert) (string, bool) {
			return alertKey(a), true
		})
		assertMaps(t, cfg.Outputs.FraudAlerts, got, ref.alerts)
	})
	t.Run("order state from cart, payment and fulfillment", func(t *testing.T) {
		rows, err := tidemarktest.ReadStore(d, pipelines.StoreOrderState, serde.String(), serde.JSON[pipelines.OrderState]())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]pipelines.OrderState{}
		for _, r := range rows {
			if !strings.HasPrefix(r.Key, markerPrefix) {
				got[r.Key] = r.Value
			}
		}
		assertMaps(t, "store "+pipelines.StoreOrderState, got, ref.orders)
	})
	t.Run("late fulfillment alerts", func(t *testing.T) {
		out, err := tidemarktest.Output(d, cfg.Outputs.LateAlerts, serde.String(), serde.JSON[pipelines.LateFulfillment]()).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := emittedOnce(t, "late alert", out, func(k string, _ pipelines.LateFulfillment) (string, bool) { return k, true })
		assertMaps(t, cfg.Outputs.LateAlerts, got, ref.late)
	})
}

// emittedOnce maps the output records of a topic that emits each result
// once by the key keyOf gives a record (ok false: skip the record), and
// fails the test for every key emitted twice.
func emittedOnce[V any](t *testing.T, what string, out []tidemarktest.OutputRecord[string, V],
	keyOf func(key string, v V) (string, bool)) map[string]V {
	t.Helper()
	got := map[string]V{}
	for _, r := range out {
		k, ok := keyOf(r.Key, r.Value)
		if !ok {
			continue
		}
		if _, dup := got[k]; dup {
			t.Errorf("%s %s emitted twice", what, k)
		}
		got[k] = r.Value
	}
	return got
}

// outputTable folds the output records of a table's change stream into
// the table: the last value of each key; a tombstone removes the key.
func outputTable[V any](out []tidemarktest.OutputRecord[string, V]) map[string]V {
	got := map[string]V{}
	for _, r := range out {
		if r.Tombstone {
			delete(got, r.Key)
			continue
		}
		got[r.Key] = r.Value
	}
	return got
}

// assertMaps fails with the keys that differ, at most ten of them.
func assertMaps[V comparable](t *testing.T, what string, got, want map[string]V) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s: want %s", k, js(w)))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", k, js(g), js(w)))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s: %s", k, js(g)))
		}
	}
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("… %d more", len(diffs)-10))
	}
	t.Errorf("%s: %d entries, want %d:\n%s", what, len(got), len(want), strings.Join(diffs, "\n"))
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
