package gen

import (
	"time"

	"github.com/tidemark-streams/tidemark/schemas"
)

// action is what a session does at its next step. Every step emits exactly
// one event, so the profile's rate is the rate of events.
type action uint8

const (
	actClick action = iota
	actAdd
	actReserve
	actRemove
	actRelease
	actDecide
	actCapture
	actReleaseAll
	actPick
	actShip
	actDeliver
	actReturn
	actRefund
	actRestockReturn
)

type line struct {
	sku      int   // index into the tenant's skus
	price    int64 // the unit price the cart add carried
	qty      int32
	reserved bool
	removed  bool
}

// session is one user's visit to one tenant's storefront, from the first
// click to the end of the order it may place.
type session struct {
	due  time.Duration
	done bool

	next       action
	tenant     int
	user       string
	sessionID  string
	cartID     string
	orderID    string
	paymentID  string
	shipmentID string
	amount     int64
	clicksLeft int
	lastSKU    int // sku of the last product page, -1 if none
	lines      []line
	cursor     int       // line index for releases and return restocks
	last       time.Time // event time of the session's previous event
}

func (g *Generator) newSession(now time.Duration) *session {
	return &session{
		due:        now,
		next:       actClick,
		tenant:     g.pickTenant(),
		user:       "user-" + pad(int(g.users.Uint64())+1, 6),
		sessionID:  g.id("sess-"),
		clicksLeft: 1 + g.rnd.IntN(6),
		lastSKU:    -1,
	}
}

// then schedules the next action after a delay drawn from [lo, hi].
func (s *session) then(g *Generator, now time.Duration, a action, lo, hi time.Duration) {
	s.next = a
	s.due = now + g.between(lo, hi)
}

func (s *session) step(g *Generator, now time.Duration) schemas.Event {
	t := &g.tenants[s.tenant]
	ts := g.eventTime(now, s.last)
	s.last = ts
	ev := g.id("ev-")
	switch s.next {
	case actClick:
		return s.click(g, now, t, ev, ts)
	case actAdd:
		k := t.skus[s.lastSKU]
		qty := int32(1)
		if g.rnd.IntN(5) == 0 {
			qty += int32(1 + g.rnd.IntN(2))
		}
		if s.cartID == "" {
			s.cartID = g.id("cart-")
		}
		// A cart shows one price per sku: a second add of it keeps the first's.
		price := int64(-1)
		for _, l := range s.lines {
			if l.sku == s.lastSKU && !l.removed {
				price = l.price
			}
		}
		if price < 0 {
			price = g.cartPrice(&k, ts)
		}
		s.lines = append(s.lines, line{sku: s.lastSKU, price: price, qty: qty})
		s.then(g, now, actReserve, 50*time.Millisecond, 500*time.Millisecond)
		return schemas.CartEvent{EventID: ev, Tenant: t.name, CartID: s.cartID, UserID: s.user, SKU: k.id,
			Action: schemas.CartAdd, Quantity: qty, UnitPriceCents: price, Currency: "USD", EventTime: ts}
	case actReserve:
		l := &s.lines[len(s.lines)-1]
		k := &t.skus[l.sku]
		if k.stock < l.qty && g.rnd.Float64() >= g.cfg.OversellRate {
			delta := l.qty + int32(20+g.rnd.IntN(180))
			k.stock += delta
			s.then(g, now, actReserve, 10*time.Millisecond, 100*time.Millisecond)
			return schemas.InventoryEvent{EventID: ev, Tenant: t.name, SKU: k.id, WarehouseID: k.warehouse,
				Kind: schemas.InventoryRestock, Delta: delta, Reason: "replenishment", EventTime: ts}
		}
		k.stock -= l.qty
		l.reserved = true
		s.afterCartChange(g, now)
		return schemas.InventoryEvent{EventID: ev, Tenant: t.name, SKU: k.id, WarehouseID: k.warehouse,
			Kind: schemas.InventoryReserve, Delta: -l.qty, CartID: s.cartID, EventTime: ts}
	case actRemove:
		i := s.cursor
		s.lines[i].removed = true
		k := t.skus[s.lines[i].sku]
		s.then(g, now, actRelease, 50*time.Millisecond, 500*time.Millisecond)
		return schemas.CartEvent{EventID: ev, Tenant: t.name, CartID: s.cartID, UserID: s.user, SKU: k.id,
			Action: schemas.CartRemove, Quantity: s.lines[i].qty, UnitPriceCents: s.lines[i].price, Currency: "USD", EventTime: ts}
	case actRelease:
		e := s.release(t, ev, ts, "removed_from_cart")
		s.afterCartChange(g, now)
		return e
	case actDecide:
		return s.decide(g, now, t, ev, ts)
	case actCapture:
		if g.rnd.IntN(33) == 0 {
			s.startReleaseAll(g, now)
			return s.payment(t, ev, ts, schemas.PaymentFailed, "capture_declined")
		}
		s.shipmentID = g.id("ship-")
		s.then(g, now, actPick, 5*time.Second, 30*time.Second)
		return s.payment(t, ev, ts, schemas.PaymentCaptured, "")
	case actReleaseAll:
		e := s.release(t, ev, ts, "reservation_expired")
		s.startReleaseAll(g, now)
		return e
	case actPick:
		s.then(g, now, actShip, 10*time.Second, 60*time.Second)
		return s.fulfillment(t, ev, ts, schemas.FulfillmentPicked, "")
	case actShip:
		s.then(g, now, actDeliver, 20*time.Second, 90*time.Second)
		return s.fulfillment(t, ev, ts, schemas.FulfillmentShipped, []string{"dhl", "ups", "fedex", "postnl"}[g.rnd.IntN(4)])
	case actDeliver:
		if g.rnd.IntN(25) == 0 {
			s.then(g, now, actReturn, 30*time.Second, 120*time.Second)
		} else {
			s.done = true
		}
		return s.fulfillment(t, ev, ts, schemas.FulfillmentDelivered, "")
	case actReturn:
		s.then(g, now, actRefund, 5*time.Second, 30*time.Second)
		return s.fulfillment(t, ev, ts, schemas.FulfillmentReturned, "")
	case actRefund:
		s.cursor = -1
		s.nextReturnRestock(g, now)
		return s.payment(t, ev, ts, schemas.PaymentRefunded, "")
	case actRestockReturn:
		l := s.lines[s.cursor]
		k := &t.skus[l.sku]
		k.stock += l.qty
		s.nextReturnRestock(g, now)
		return schemas.InventoryEvent{EventID: ev, Tenant: t.name, SKU: k.id, WarehouseID: k.warehouse,
			Kind: schemas.InventoryRestock, Delta: l.qty, Reason: "return", EventTime: ts}
	}
	panic("gen: unknown session action")
}

var browsePages = []schemas.PageType{schemas.PageHome, schemas.PageSearch, schemas.PageCategory}

func (s *session) click(g *Generator, now time.Duration, t *tenant, ev string, ts time.Time) schemas.Event {
	c := schemas.ClickEvent{EventID: ev, Tenant: t.name, UserID: s.user, SessionID: s.sessionID,
		Page: schemas.PageProduct, EventTime: ts, Device: []string{"web", "mobile", "app"}[g.rnd.IntN(3)]}
	if g.rnd.IntN(4) == 0 {
		c.Page = browsePages[g.rnd.IntN(len(browsePages))]
	} else {
		s.lastSKU = int(t.popularity.Uint64())
		c.SKU = t.skus[s.lastSKU].id
	}
	s.clicksLeft--
	switch {
	case c.Page == schemas.PageProduct && g.rnd.IntN(10) < 3:
		s.then(g, now, actAdd, 2*time.Second, 15*time.Second)
	case s.clicksLeft > 0:
		s.then(g, now, actClick, time.Second, 10*time.Second)
	case s.hasReserved():
		s.then(g, now, actDecide, 5*time.Second, 30*time.Second)
	default:
		s.done = true
	}
	return c
}

// afterCartChange picks what follows a reserve or a release: another line
// removed, more browsing, or the checkout decision.
func (s *session) afterCartChange(g *Generator, now time.Duration) {
	if r := s.reservedLines(); len(r) > 1 && g.rnd.IntN(10) == 0 {
		s.cursor = r[g.rnd.IntN(len(r))]
		s.then(g, now, actRemove, 3*time.Second, 20*time.Second)
		return
	}
	if s.clicksLeft > 0 && g.rnd.IntN(2) == 0 {
		s.then(g, now, actClick, time.Second, 10*time.Second)
		return
	}
	if !s.hasReserved() {
		s.done = true // Every line was removed; the session ends quietly.
		return
	}
	s.then(g, now, actDecide, 5*time.Second, 30*time.Second)
}

// decide checks out (payment authorized, or declined outright) or abandons
// the cart: a last look at the cart page, then the reservations expire.
func (s *session) decide(g *Generator, now time.Duration, t *tenant, ev string, ts time.Time) schemas.Event {
	if !s.hasReserved() {
		panic("gen: checkout decision without a reserved line")
	}
	if g.rnd.IntN(100) < 65 {
		s.orderID, s.paymentID = g.id("order-"), g.id("pay-")
		s.amount = 0
		for _, l := range s.lines {
			if l.reserved {
				s.amount += int64(l.qty) * l.price
			}
		}
		if g.rnd.IntN(20) == 0 {
			s.startReleaseAll(g, now)
			return s.payment(t, ev, ts, schemas.PaymentFailed, "insufficient_funds")
		}
		s.then(g, now, actCapture, time.Second, 10*time.Second)
		return s.payment(t, ev, ts, schemas.PaymentAuthorized, "")
	}
	s.cursor = -1
	s.startReleaseAll(g, now)
	s.due = now + g.between(30*time.Second, 90*time.Second)
	return schemas.ClickEvent{EventID: ev, Tenant: t.name, UserID: s.user, SessionID: s.sessionID,
		Page: schemas.PageCart, EventTime: ts, Device: "web"}
}

// startReleaseAll schedules the release of the next still-reserved line, or
// ends the session when none is left.
func (s *session) startReleaseAll(g *Generator, now time.Duration) {
	for i, l := range s.lines {
		if l.reserved {
			s.cursor = i
			s.then(g, now, actReleaseAll, 20*time.Millisecond, 200*time.Millisecond)
			return
		}
	}
	s.done = true
}

// nextReturnRestock schedules putting the next line of a returned order
// back into stock, or ends the session.
func (s *session) nextReturnRestock(g *Generator, now time.Duration) {
	for i := s.cursor + 1; i < len(s.lines); i++ {
		if l := s.lines[i]; l.reserved && !l.removed {
			s.cursor = i
			s.then(g, now, actRestockReturn, time.Second, 10*time.Second)
			return
		}
	}
	s.done = true
}

func (s *session) hasReserved() bool { return len(s.reservedLines()) > 0 }

func (s *session) reservedLines() []int {
	var r []int
	for i, l := range s.lines {
		if l.reserved {
			r = append(r, i)
		}
	}
	return r
}

// release puts the reserved line at the cursor back in stock, for a line
// removed from the cart or a reservation that expired (reason says which).
func (s *session) release(t *tenant, ev string, ts time.Time, reason string) schemas.Event {
	l := &s.lines[s.cursor]
	k := &t.skus[l.sku]
	k.stock += l.qty
	l.reserved = false
	return schemas.InventoryEvent{EventID: ev, Tenant: t.name, SKU: k.id, WarehouseID: k.warehouse,
		Kind: schemas.InventoryRelease, Delta: l.qty, CartID: s.cartID, Reason: reason, EventTime: ts}
}

func (s *session) payment(t *tenant, ev string, ts time.Time, st schemas.PaymentStatus, reason string) schemas.Event {
	return schemas.PaymentEvent{EventID: ev, Tenant: t.name, PaymentID: s.paymentID, OrderID: s.orderID,
		CartID: s.cartID, UserID: s.user, Status: st, AmountCents: s.amount, Currency: "USD", Method: "card",
		FailureReason: reason, EventTime: ts}
}

// fulfillment ships from the warehouse of the order's first line.
func (s *session) fulfillment(t *tenant, ev string, ts time.Time, st schemas.FulfillmentStatus, carrier string) schemas.Event {
	wh := t.skus[s.lines[s.reservedLines()[0]].sku].warehouse
	return schemas.FulfillmentEvent{EventID: ev, Tenant: t.name, ShipmentID: s.shipmentID, OrderID: s.orderID,
		UserID: s.user, WarehouseID: wh, Status: st, Carrier: carrier, EventTime: ts}
}
