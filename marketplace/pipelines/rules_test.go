package pipelines_test

import (
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// Hand-written cases for the rules the reference test checks in bulk.

const t0 = int64(1_800_000_000_000) // a whole minute, so windows start here

func payment(order, user string, st schemas.PaymentStatus, at int64) schemas.PaymentEvent {
	return schemas.PaymentEvent{EventID: "ev-" + order + string(st), Tenant: "seller-001", PaymentID: "pay-" + order, OrderID: order,
		CartID: "cart-" + order, UserID: user, Status: st, AmountCents: 1000, Currency: "USD", Method: "card", EventTime: time.UnixMilli(at)}
}

func shipment(order string, st schemas.FulfillmentStatus, at int64) schemas.FulfillmentEvent {
	return schemas.FulfillmentEvent{EventID: "ev-" + order + string(st), Tenant: "seller-001", ShipmentID: "ship-" + order, OrderID: order,
		UserID: "user-1", WarehouseID: "wh-1", Status: st, EventTime: time.UnixMilli(at)}
}

func TestLateFulfillmentRule(t *testing.T) {
	cfg := pipelines.Config{ShipWithin: time.Minute, Grace: time.Second}
	d := newDriver(t, pipelines.Orders, cfg)
	pays := tidemarktest.Input(d, gen.DefaultTopics.Payments, serde.String(), schemas.Payment.Avro())
	ships := tidemarktest.Input(d, gen.DefaultTopics.Fulfillment, serde.String(), schemas.Fulfillment.Avro())
	pipe := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// order-on-time ships 59 s after capture; order-edge exactly at the
	// deadline; order-late 61 s after; order-never not at all;
	// order-picked is only picked. An order that was never captured
	// cannot be late.
	for _, o := range []string{"order-on-time", "order-edge", "order-late", "order-never", "order-picked"} {
		pipe(pays.Pipe(o, payment(o, "user-1", schemas.PaymentCaptured, t0), t0))
	}
	pipe(pays.Pipe("order-declined", payment("order-declined", "user-1", schemas.PaymentFailed, t0), t0))
	pipe(ships.Pipe("order-on-time", shipment("order-on-time", schemas.FulfillmentShipped, t0+59_000), t0+59_000))
	pipe(ships.Pipe("order-edge", shipment("order-edge", schemas.FulfillmentShipped, t0+60_000), t0+60_000))
	pipe(ships.Pipe("order-picked", shipment("order-picked", schemas.FulfillmentPicked, t0+20_000), t0+20_000))
	pipe(ships.Pipe("order-late", shipment("order-late", schemas.FulfillmentShipped, t0+61_000), t0+61_000))

	out := tidemarktest.Output(d, pipelines.DefaultOutputs.LateAlerts, serde.String(), serde.JSON[pipelines.LateFulfillment]())
	if n := out.Len(); n != 0 {
		t.Fatalf("%d alerts before stream time passed deadline + grace", n)
	}
	// Stream time past every deadline plus grace closes the windows. The
	// join's stream time moves only with records that reach it (captures
	// and shipments), so the closer is a shipment.
	pipe(ships.Pipe("order-other", shipment("order-other", schemas.FulfillmentShipped, t0+70_000), t0+70_000))
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pipelines.LateFulfillment{}
	for _, r := range recs {
		got[r.Key] = r.Value
	}
	want := map[string]pipelines.LateFulfillment{}
	for _, o := range []string{"order-late", "order-never", "order-picked"} {
		want[o] = pipelines.LateFulfillment{OrderID: o, UserID: "user-1", Tenant: "seller-001", AmountCents: 1000, CapturedMs: t0, DeadlineMs: t0 + 60_000}
	}
	if len(recs) != len(got) {
		t.Errorf("%d alerts for %d orders: one alert per order", len(recs), len(got))
	}
	assertMaps(t, "late alerts", got, want)
}

func TestFraudAlertAtThresholdEmittedOnceWhenTheWindowCloses(t *testing.T) {
	cfg := pipelines.Config{FraudThreshold: 3, FraudWindow: time.Minute, FraudAdvance: time.Minute, Grace: time.Second}
	d := newDriver(t, pipelines.Fraud, cfg)
	pays := tidemarktest.Input(d, gen.DefaultTopics.Payments, serde.String(), schemas.Payment.Avro())
	out := tidemarktest.Output(d, pipelines.DefaultOutputs.FraudAlerts, serde.String(), serde.JSON[pipelines.FraudAlert]())
	for i, p := range []schemas.PaymentEvent{
		payment("o1", "mallory", schemas.PaymentAuthorized, t0+1_000),
		payment("o2", "mallory", schemas.PaymentFailed, t0+2_000),
		payment("o1", "mallory", schemas.PaymentCaptured, t0+3_000), // a follow-up, not an attempt
		payment("o3", "mallory", schemas.PaymentAuthorized, t0+4_000),
		payment("o4", "alice", schemas.PaymentAuthorized, t0+5_000),
		payment("o5", "alice", schemas.PaymentAuthorized, t0+6_000), // alice: 2 < 3
	} {
		if err := pays.Pipe(p.OrderID, p, p.EventTime.UnixMilli()); err != nil {
			t.Fatalf("payment %d: %v", i, err)
		}
	}
	if n := out.Len(); n != 0 {
		t.Fatalf("%d alerts before the window closed: emit-final", n)
	}
	closer := payment("o9", "bob", schemas.PaymentAuthorized, t0+61_000) // stream time ≥ end + grace
	if err := pays.Pipe("o9", closer, t0+61_000); err != nil {
		t.Fatal(err)
	}
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := pipelines.FraudAlert{UserID: "mallory", Attempts: 3, Declined: 1, AmountCents: 3000, WindowStartMs: t0, WindowEndMs: t0 + 60_000}
	if len(recs) != 1 || recs[0].Value != want {
		t.Fatalf("alerts %+v, want exactly %+v", recs, want)
	}
}

func TestRedeliveredPaymentCountsOnce(t *testing.T) {
	cfg := pipelines.Config{FraudThreshold: 3, FraudWindow: time.Minute, FraudAdvance: time.Minute, Grace: time.Second}
	d := newDriver(t, pipelines.Fraud, cfg)
	pays := tidemarktest.Input(d, gen.DefaultTopics.Payments, serde.String(), schemas.Payment.Avro())
	out := tidemarktest.Output(d, pipelines.DefaultOutputs.FraudAlerts, serde.String(), serde.JSON[pipelines.FraudAlert]())
	o1 := payment("o1", "mallory", schemas.PaymentAuthorized, t0+1_000)
	for i, p := range []schemas.PaymentEvent{
		o1,
		o1, // redelivered: same event id, same order key
		payment("o2", "mallory", schemas.PaymentFailed, t0+2_000),
		o1, // redelivered again, after another event
		payment("o3", "mallory", schemas.PaymentAuthorized, t0+4_000),
		payment("o9", "bob", schemas.PaymentAuthorized, t0+61_000), // closes [t0, t0+60s)
	} {
		if err := pays.Pipe(p.OrderID, p, p.EventTime.UnixMilli()); err != nil {
			t.Fatalf("payment %d: %v", i, err)
		}
	}
	recs, err := out.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := pipelines.FraudAlert{UserID: "mallory", Attempts: 3, Declined: 1, AmountCents: 3000, WindowStartMs: t0, WindowEndMs: t0 + 60_000}
	if len(recs) != 1 || recs[0].Value != want {
		t.Fatalf("alerts %+v, want exactly %+v: o1 counted once, not three times", recs, want)
	}
	m := d.Metrics()
	if n := m.DroppedBy[task.DropKey{Node: pipelines.StorePaymentDedup, Reason: topology.DropDuplicate}]; n != 2 || m.TotalDropped() != 2 {
		t.Errorf("dropped %v, want the 2 redeliveries as duplicates at %s", m.DroppedBy, pipelines.StorePaymentDedup)
	}
}

func TestAvailabilityIsStockMinusHeld(t *testing.T) {
	ev := func(kind schemas.InventoryKind, delta int32) schemas.InventoryEvent {
		e := inventoryEvent("sku-1", delta)
		e.Kind = kind
		return e
	}
	var a pipelines.Availability
	for _, e := range []schemas.InventoryEvent{
		ev(schemas.InventoryRestock, 10), // stock 10
		ev(schemas.InventoryReserve, -3), // a cart holds 3
		ev(schemas.InventoryReserve, -2), // another holds 2, later sold: the hold stays
		ev(schemas.InventoryRelease, 3),  // the first cart is abandoned
		ev(schemas.InventoryAdjust, -1),  // shrinkage
	} {
		a = a.Apply(e)
	}
	want := pipelines.Availability{SKU: "sku-1", Tenant: "seller-001", OnHand: 9, Held: 2, Available: 7, Events: 5}
	if a != want {
		t.Fatalf("got %+v, want %+v", a, want)
	}
}
