package pipelines_test

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/task"
)

// reference is what the pipelines must output for a stream of generated
// events, computed here directly from the events with maps and loops, in
// no particular order: the pipelines' results are functions of event time.
type reference struct {
	availability map[string]pipelines.Availability    // by sku
	alerts       map[string]pipelines.FraudAlert      // by alertKey
	orders       map[string]pipelines.OrderState      // by order id
	late         map[string]pipelines.LateFulfillment // by order id
	maxTime      time.Time
}

func alertKey(a pipelines.FraudAlert) string { return fmt.Sprintf("%s@%d", a.UserID, a.WindowStartMs) }

func computeReference(evs []gen.Event, cfg pipelines.Config) reference {
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		panic(err)
	}
	ref := reference{
		availability: map[string]pipelines.Availability{}, alerts: map[string]pipelines.FraudAlert{},
		orders: map[string]pipelines.OrderState{}, late: map[string]pipelines.LateFulfillment{},
	}
	type win struct {
		user  string
		start int64
	}
	velocity := map[win]pipelines.Velocity{}
	carts := map[string][]schemas.CartEvent{}
	shipped := map[string][]int64{}
	var payments []schemas.PaymentEvent
	size, adv := cfg.FraudWindow.Milliseconds(), cfg.FraudAdvance.Milliseconds()
	for _, ev := range evs {
		if ev.Time().After(ref.maxTime) {
			ref.maxTime = ev.Time()
		}
		switch v := ev.Value.(type) {
		case schemas.InventoryEvent:
			ref.availability[v.SKU] = ref.availability[v.SKU].Apply(v)
		case schemas.CartEvent:
			carts[v.CartID] = append(carts[v.CartID], v)
		case schemas.PaymentEvent:
			payments = append(payments, v)
			ref.orders[v.OrderID] = ref.orders[v.OrderID].Apply(pipelines.PaymentUpdate(v))
			if pipelines.IsAttempt(v) {
				t := v.EventTime.UnixMilli()
				for s := t - t%adv; s > t-size; s -= adv {
					w := win{v.UserID, s}
					agg := velocity[w]
					agg.Attempts++
					if v.Status == schemas.PaymentFailed {
						agg.Declined++
					}
					agg.AmountCents += v.AmountCents
					velocity[w] = agg
				}
			}
		case schemas.FulfillmentEvent:
			ref.orders[v.OrderID] = ref.orders[v.OrderID].Apply(pipelines.FulfillmentUpdate(v))
			if v.Status == schemas.FulfillmentShipped {
				shipped[v.OrderID] = append(shipped[v.OrderID], v.EventTime.UnixMilli())
			}
		}
	}
	for w, v := range velocity {
		if v.Attempts >= cfg.FraudThreshold {
			a := pipelines.FraudAlert{UserID: w.user, Attempts: v.Attempts, Declined: v.Declined, AmountCents: v.AmountCents,
				WindowStartMs: w.start, WindowEndMs: w.start + size}
			ref.alerts[alertKey(a)] = a
		}
	}
	within := cfg.ShipWithin.Milliseconds()
	for _, p := range payments {
		t := p.EventTime.UnixMilli()
		switch p.Status {
		case schemas.PaymentAuthorized:
			for _, c := range carts[p.CartID] {
				if d := c.EventTime.UnixMilli() - t; d <= cfg.CheckoutWindow.Milliseconds() && d >= -cfg.CheckoutWindow.Milliseconds() {
					ref.orders[p.OrderID] = ref.orders[p.OrderID].Apply(pipelines.CartLine(p.OrderID, c))
				}
			}
		case schemas.PaymentCaptured:
			found := false
			for _, s := range shipped[p.OrderID] {
				found = found || (s >= t && s <= t+within)
			}
			if !found {
				ref.late[p.OrderID] = pipelines.LateFulfillment{OrderID: p.OrderID, UserID: p.UserID, Tenant: p.Tenant,
					AmountCents: p.AmountCents, CapturedMs: t, DeadlineMs: t + within}
			}
		}
	}
	return ref
}

// markerPrefix marks the ids of flush markers, which the comparisons skip.
const markerPrefix = "zz-flush-"

// flushMarkers are an authorized and a captured payment per partition, timed after
// every window of the reference has closed: they advance the stream time
// of every task (their order, cart and user ids are one string, hashed to
// each partition in turn), so emit-final windows and left-join windows
// close. They touch no sku, cart or user of the generated stream.
func flushMarkers(ref reference, cfg pipelines.Config, partitions int32) []schemas.PaymentEvent {
	cfg.EnsureDefaults()
	at := ref.maxTime.Add(cfg.Grace + max(cfg.FraudWindow, cfg.ShipWithin, cfg.CheckoutWindow) + time.Minute)
	var out []schemas.PaymentEvent
	covered := map[int32]bool{}
	for i := 0; int32(len(covered)) < partitions; i++ {
		id := fmt.Sprintf("%s%d", markerPrefix, i)
		p := task.DefaultPartition([]byte(id), partitions)
		if covered[p] {
			continue
		}
		covered[p] = true
		// Operators keep their own stream time: the fraud windows see only
		// attempts, the ship-deadline join only captures.
		for _, st := range []schemas.PaymentStatus{schemas.PaymentAuthorized, schemas.PaymentCaptured} {
			out = append(out, schemas.PaymentEvent{EventID: id + string(st), Tenant: "flush", PaymentID: id, OrderID: id, CartID: id,
				UserID: id, Status: st, Currency: "USD", Method: "card", EventTime: at})
		}
	}
	return out
}

// testStream is the generated input of the pipeline tests: a low rate, so
// that a few thousand events cover minutes of event time and whole order
// lifecycles. Event time starts at the current hour, not at the
// generator's fixed origin: a broker deletes records older than the
// topic's retention (7 days by default) by their timestamps, outputs
// included. Any whole hour aligns the windows alike, so the stream's
// shape, and every count the tests rely on, is the same in every hour.
func testStream(n int) []gen.Event {
	// Two hours back: the flush markers run about 35 minutes past the
	// stream, and Kafka 4 rejects timestamps more than
	// log.message.timestamp.after.max.ms (1 h) in the future
	// (INVALID_TIMESTAMP), which a start in the current hour reached in
	// its last minutes.
	start := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	// Frequent price changes and stale cart prices give the pricing
	// pipeline's as-of check something to find in a short stream.
	g, err := gen.New(gen.Config{Seed: 7, Start: start, Profile: gen.Profile{Rate: 20}, Tenants: 3, Users: 500, SKUsPerTenant: 40,
		PriceChangeRate: 0.03, StalePriceRate: 0.3})
	if err != nil {
		panic(err)
	}
	return g.Take(n)
}

// testConfig: a fraud threshold the test stream crosses a few times.
func testConfig() pipelines.Config {
	return pipelines.Config{FraudThreshold: 3, Inputs: gen.DefaultTopics}
}
