package pipelines_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/schemas"
)

// On the real broker with a dead-letter topic configured, malformed bytes
// and a payment event written to the inventory topic go to the dead-letter
// topic with headers naming the error and the source record, and the
// inventory table is exactly that of the good records.
func TestUndecodableInventoryGoesToDeadLetterTopicOnKafka(t *testing.T) {
	cfg := pipelines.Config{Inputs: gen.Topics{Clicks: "unused", Carts: "unused-carts", Payments: "unused-payments", Fulfillment: "unused-fulfillment",
		Inventory: kafkatest.NewTopic(t, 1, nil)}, Outputs: pipelines.Outputs{Availability: kafkatest.NewTopic(t, 1, nil)}}
	dlq := kafkatest.NewTopic(t, 1, nil)
	cfg.EnsureDefaults()

	var good []gen.Event
	for _, ev := range testStream(2000) {
		if ev.Stream == gen.Inventory {
			good = append(good, ev)
		}
	}
	ref := computeReference(good, cfg)
	g, err := gen.New(gen.Config{Topics: cfg.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	pay, err := schemas.Payment.Avro().Encode(nil, schemas.PaymentEvent{EventID: "ev-p", Tenant: "seller-001", PaymentID: "pay-1",
		OrderID: "order-1", CartID: "cart-1", UserID: "user-1", Status: schemas.PaymentAuthorized, AmountCents: 100,
		Currency: "USD", Method: "card", EventTime: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i, ev := range good {
		r, err := g.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		switch i {
		case 3:
			recs = append(recs, &kgo.Record{Topic: cfg.Inputs.Inventory, Key: []byte("garbage"), Value: []byte{0xff, 0x00, 0x13}})
		case 7:
			recs = append(recs, &kgo.Record{Topic: cfg.Inputs.Inventory, Key: []byte("order-1"), Value: pay})
		}
	}
	kafkatest.Produce(t, recs...)

	topo, err := pipelines.Build(kafkatest.UniqueName(t, "dlq"), []string{pipelines.Inventory}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, topo, processor.WithDeadLetterTopic(dlq))

	dead := kafkatest.ConsumeExactly(t, dlq, 2, time.Minute, 2*time.Second)
	for i, wantKey := range []string{"garbage", "order-1"} {
		h := map[string]string{}
		for _, x := range dead[i].Headers {
			h[x.Key] = string(x.Value)
		}
		if string(dead[i].Key) != wantKey || h["tidemark.source.topic"] != cfg.Inputs.Inventory ||
			!strings.Contains(h["tidemark.error"], "malformed payload") {
			t.Errorf("dead letter %d: key %q headers %v; want key %q from %s with a malformed-payload error", i, dead[i].Key, h, wantKey, cfg.Inputs.Inventory)
		}
	}
	rs := readUntil(t, cfg.Outputs.Availability, func(rs []*kgo.Record) bool {
		return len(lastByKey[pipelines.Availability](t, rs)) == len(ref.availability) && len(rs) == len(good)
	})
	assertMaps(t, "availability", lastByKey[pipelines.Availability](t, rs), ref.availability)
}
