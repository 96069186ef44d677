package pipelines

import (
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// OrderState is the orders pipeline's row for one order. Key: order id.
//
// Each field is a commutative fold of the order's events (sums, the most
// advanced status, the time of each step), so the row after a set of
// events does not depend on the order they were processed in.
type OrderState struct {
	OrderID string `json:"order_id"`
	CartID  string `json:"cart_id"`
	UserID  string `json:"user_id"`
	Tenant  string `json:"tenant"`
	// Cart side, from the checkout join: the cart events (adds and
	// removes) within CheckoutWindow of the authorization.
	CartEvents     int64 `json:"cart_events"`
	Units          int64 `json:"units"`            // added − removed
	CartValueCents int64 `json:"cart_value_cents"` // Σ ±quantity × unit price
	// Payment side.
	AmountCents  int64  `json:"amount_cents"`
	Payment      string `json:"payment"` // most advanced PaymentStatus
	AuthorizedMs int64  `json:"authorized_ms,omitempty"`
	CapturedMs   int64  `json:"captured_ms,omitempty"`
	// Fulfillment side.
	Fulfillment string `json:"fulfillment,omitempty"` // most advanced FulfillmentStatus
	ShippedMs   int64  `json:"shipped_ms,omitempty"`
	DeliveredMs int64  `json:"delivered_ms,omitempty"`
}

// LateFulfillment is a captured order with no shipment within
// Config.ShipWithin of the capture, in event time. Key: order id.
type LateFulfillment struct {
	OrderID     string `json:"order_id"`
	UserID      string `json:"user_id"`
	Tenant      string `json:"tenant"`
	AmountCents int64  `json:"amount_cents"`
	CapturedMs  int64  `json:"captured_ms"`
	DeadlineMs  int64  `json:"deadline_ms"`
}

// OrderUpdate is one event folded into an OrderState: a cart line from the
// checkout join, a payment or a fulfillment step.
type OrderUpdate struct {
	OrderID     string `json:"order_id"`
	CartID      string `json:"cart_id,omitempty"`
	UserID      string `json:"user_id"`
	Tenant      string `json:"tenant"`
	Line        bool   `json:"line,omitempty"`
	Units       int64  `json:"units,omitempty"`
	ValueCents  int64  `json:"value_cents,omitempty"`
	AmountCents int64  `json:"amount_cents,omitempty"`
	Payment     string `json:"payment,omitempty"`
	Fulfillment string `json:"fulfillment,omitempty"`
	TimeMs      int64  `json:"time_ms"`
}

var (
	paymentRank     = map[string]int{"": 0, string(schemas.PaymentAuthorized): 1, string(schemas.PaymentCaptured): 2, string(schemas.PaymentFailed): 2, string(schemas.PaymentRefunded): 3}
	fulfillmentRank = map[string]int{"": 0, string(schemas.FulfillmentPicked): 1, string(schemas.FulfillmentShipped): 2, string(schemas.FulfillmentDelivered): 3, string(schemas.FulfillmentReturned): 4}
)

// Apply folds one update into the state.
func (s OrderState) Apply(u OrderUpdate) OrderState {
	s.OrderID, s.UserID, s.Tenant = u.OrderID, u.UserID, u.Tenant
	if u.CartID != "" {
		s.CartID = u.CartID
	}
	switch {
	case u.Line:
		s.CartEvents++
		s.Units += u.Units
		s.CartValueCents += u.ValueCents
	case u.Payment != "":
		s.AmountCents = u.AmountCents
		if paymentRank[u.Payment] > paymentRank[s.Payment] {
			s.Payment = u.Payment
		}
		switch schemas.PaymentStatus(u.Payment) {
		case schemas.PaymentAuthorized:
			s.AuthorizedMs = u.TimeMs
		case schemas.PaymentCaptured:
			s.CapturedMs = u.TimeMs
		}
	case u.Fulfillment != "":
		if fulfillmentRank[u.Fulfillment] > fulfillmentRank[s.Fulfillment] {
			s.Fulfillment = u.Fulfillment
		}
		switch schemas.FulfillmentStatus(u.Fulfillment) {
		case schemas.FulfillmentShipped:
			s.ShippedMs = u.TimeMs
		case schemas.FulfillmentDelivered:
			s.DeliveredMs = u.TimeMs
		}
	}
	return s
}

// CartLine is the update a cart event makes to the order it was checked
// out in.
func CartLine(orderID string, c schemas.CartEvent) OrderUpdate {
	units := int64(c.Quantity)
	if c.Action == schemas.CartRemove {
		units = -units
	}
	return OrderUpdate{OrderID: orderID, CartID: c.CartID, UserID: c.UserID, Tenant: c.Tenant, Line: true,
		Units: units, ValueCents: units * c.UnitPriceCents, TimeMs: c.EventTime.UnixMilli()}
}

// PaymentUpdate is the update of a payment event.
func PaymentUpdate(p schemas.PaymentEvent) OrderUpdate {
	return OrderUpdate{OrderID: p.OrderID, CartID: p.CartID, UserID: p.UserID, Tenant: p.Tenant,
		AmountCents: p.AmountCents, Payment: string(p.Status), TimeMs: p.EventTime.UnixMilli()}
}

// FulfillmentUpdate is the update of a fulfillment event.
func FulfillmentUpdate(f schemas.FulfillmentEvent) OrderUpdate {
	return OrderUpdate{OrderID: f.OrderID, UserID: f.UserID, Tenant: f.Tenant,
		Fulfillment: string(f.Status), TimeMs: f.EventTime.UnixMilli()}
}

type shipCheck struct {
	Alert   LateFulfillment
	Shipped bool
}

// addOrders adds the order-state pipeline and its late-fulfillment alerts:
//
//	checkout join (stream-stream, inner, ±CheckoutWindow):
//	  Inputs.Carts (key cart id) ⋈ authorized Inputs.Payments re-keyed by cart id
//	  (repartition <app>-checkout-join-right-repartition) → one cart line per cart event
//	order state (aggregate, store StoreOrderState):
//	  cart lines ∪ payments ∪ fulfillment (through the repartition topics
//	  <app>-payment-updates- and <app>-fulfillment-updates-repartition), re-keyed by order id
//	  (repartition <app>-orders-by-id-repartition) → OrderState
//	  → its changelog stream → Outputs.OrderState (key order id, OrderState JSON)
//	late fulfillment (stream-stream left join, stores ship-deadline-*):
//	  captured payments ⟕ shipped fulfillment, window [capture, capture+ShipWithin], grace Grace
//	  → unmatched captures → Outputs.LateAlerts (key order id, LateFulfillment JSON)
//
// The payment and fulfillment updates pass through repartition topics of
// their own although their key does not change: without them the payments
// source, the checkout join and the late-fulfillment join would form one
// sub-topology that reads the repartition topic it writes, whose partition
// count the runtime cannot derive from its sources.
//
// Late fulfillment is a windowed left join rather than a punctuator
// because the join already is what the rule says in event time: a left
// record without a partner once stream time passes its window end plus
// grace is emitted exactly once, from changelogged state, so a restart
// neither repeats nor loses an alert. A punctuator would need its own
// deadline index and the same closing rule.
func addOrders(in inputs, cfg Config) {
	authorized := in.payments.
		Filter(func(_ string, p schemas.PaymentEvent) bool { return p.Status == schemas.PaymentAuthorized },
			topology.Named("authorized-payments")).
		SelectKey(func(_ string, p schemas.PaymentEvent) string { return p.CartID }, topology.Named("payment-cart"))
	lines := in.carts.
		Join(authorized, func(_ string, c schemas.CartEvent, p schemas.PaymentEvent) OrderUpdate { return CartLine(p.OrderID, c) },
			topology.JoinWindowsOf(cfg.CheckoutWindow, cfg.Grace), topology.Named(StoreCarts)).
		SelectKey(func(_ string, u OrderUpdate) string { return u.OrderID }, topology.Named("line-order")).
		WithSerdes(serde.String(), serde.JSON[OrderUpdate]())
	pays := in.payments.
		MapValues(func(_ string, p schemas.PaymentEvent) OrderUpdate { return PaymentUpdate(p) }, topology.Named("payment-update")).
		WithSerdes(serde.String(), serde.JSON[OrderUpdate]()).
		Repartition(topology.Named("payment-updates"))
	ships := in.fulfillment.
		MapValues(func(_ string, f schemas.FulfillmentEvent) OrderUpdate { return FulfillmentUpdate(f) }, topology.Named("fulfillment-update")).
		WithSerdes(serde.String(), serde.JSON[OrderUpdate]()).
		Repartition(topology.Named("fulfillment-updates"))
	lines.Merge(pays, topology.Named("order-updates-1")).Merge(ships, topology.Named("order-updates")).
		GroupByKey(topology.Named("orders-by-id")).
		Aggregate(func() OrderState { return OrderState{} },
			func(_ string, u OrderUpdate, s OrderState) OrderState { return s.Apply(u) },
			serde.JSON[OrderState](), topology.Named(StoreOrderState)).
		ToStream(topology.Named("order-changes")).
		To(cfg.Outputs.OrderState, topology.Named("order-state-sink"))

	captured := in.payments.Filter(func(_ string, p schemas.PaymentEvent) bool { return p.Status == schemas.PaymentCaptured },
		topology.Named("captured-payments"))
	shipped := in.fulfillment.Filter(func(_ string, f schemas.FulfillmentEvent) bool { return f.Status == schemas.FulfillmentShipped },
		topology.Named("shipped-orders"))
	within := cfg.ShipWithin.Milliseconds()
	captured.
		LeftJoin(shipped, func(_ string, p schemas.PaymentEvent, _ schemas.FulfillmentEvent, found bool) shipCheck {
			t := p.EventTime.UnixMilli()
			return shipCheck{Shipped: found, Alert: LateFulfillment{OrderID: p.OrderID, UserID: p.UserID, Tenant: p.Tenant,
				AmountCents: p.AmountCents, CapturedMs: t, DeadlineMs: t + within}}
		}, topology.JoinWindowsOf(cfg.ShipWithin, cfg.Grace).Before(0), topology.Named(StoreShipDeadline)).
		Filter(func(_ string, c shipCheck) bool { return !c.Shipped }, topology.Named("not-shipped")).
		MapValues(func(_ string, c shipCheck) LateFulfillment { return c.Alert }, topology.Named("late-fulfillment")).
		WithSerdes(serde.String(), serde.JSON[LateFulfillment]()).
		To(cfg.Outputs.LateAlerts, topology.Named("late-alerts-sink"))
}
