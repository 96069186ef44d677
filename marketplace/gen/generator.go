package gen

import (
	"container/heap"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tidemark-streams/tidemark/schemas"
)

// Stream identifies which topic an event belongs to.
type Stream uint8

const (
	Clicks Stream = iota
	Carts
	Inventory
	Payments
	Fulfillment
	Products
	Tenants
	numStreams
)

func (s Stream) String() string {
	return [...]string{"clicks", "carts", "inventory", "payments", "fulfillment", "products", "tenants"}[s]
}

// Event is one generated event.
type Event struct {
	// Seq is the event's position in the stream, from 0.
	Seq uint64
	// Offset is when, on the rate profile's schedule, the event is emitted;
	// Run sends it at that offset from its start.
	Offset time.Duration
	Stream Stream
	// Value is a schemas.ClickEvent, CartEvent, InventoryEvent, PaymentEvent,
	// FulfillmentEvent, ProductEvent or TenantEvent (values, not pointers),
	// matching Stream.
	Value schemas.Event
}

// Key is the record key: the id the event's topic is partitioned by.
func (e Event) Key() string { return e.Value.Key() }

// Time is the event time.
func (e Event) Time() time.Time { return e.Value.Time() }

// Generator produces the stream. It is not safe for concurrent use; it is a
// pure function of its Config, consumed in order.
type Generator struct {
	cfg     Config
	rnd     *rand.Rand
	users   *rand.Zipf
	tenants []tenant
	enc     encoder

	seq    uint64
	offset float64 // seconds into the schedule of the next event
	ids    uint64
	tie    uint64
	queue  sessionQueue
	counts [numStreams]uint64
	// catalog holds the listing events not emitted yet: every tenant and
	// sku, emitted first, before any activity refers to them.
	catalog []schemas.Event
}

// New validates cfg and returns a generator positioned at the first event.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	g := &Generator{cfg: cfg, rnd: r}
	g.users = rand.NewZipf(r, cfg.UserSkew, 1, uint64(cfg.Users-1))
	g.tenants = newTenants(r, cfg)
	enc, err := newEncoder(cfg)
	if err != nil {
		return nil, err
	}
	g.enc = enc
	g.catalog = g.listing()
	return g, nil
}

// Config is the configuration in effect, defaults applied.
func (g *Generator) Config() Config { return g.cfg }

// Counts is how many events of each stream were generated so far.
func (g *Generator) Counts() map[Stream]uint64 {
	m := make(map[Stream]uint64, numStreams)
	for s := range numStreams {
		m[s] = g.counts[s]
	}
	return m
}

// Next generates the next event. The stream is unbounded.
func (g *Generator) Next() Event {
	now := g.NextOffset()
	if len(g.catalog) > 0 {
		// The listing comes first, on the schedule like every event.
		v := g.catalog[0]
		g.catalog = g.catalog[1:]
		ev := g.emit(now, v)
		g.offset += 1 / g.cfg.Profile.RateAt(now)
		return ev
	}
	var v schemas.Event
	var s *session
	if len(g.queue) > 0 && g.queue[0].due <= now {
		s = heap.Pop(&g.queue).(queued).s
	} else if x := g.rnd.Float64(); x < 0.005 {
		v = g.backgroundInventory(now)
	} else if x < 0.005+g.cfg.PriceChangeRate {
		v = g.priceChange(now)
	} else if x < 0.005+g.cfg.PriceChangeRate+g.cfg.TierChangeRate {
		v = g.tierChange(now)
	} else {
		s = g.newSession(now)
	}
	if s != nil {
		v = s.step(g, now)
		if !s.done {
			g.tie++
			heap.Push(&g.queue, queued{due: s.due, tie: g.tie, s: s})
		}
	}
	ev := g.emit(now, v)
	g.offset += 1 / g.cfg.Profile.RateAt(now)
	return ev
}

func (g *Generator) emit(now time.Duration, v schemas.Event) Event {
	ev := Event{Seq: g.seq, Offset: now, Stream: streamOf(v), Value: v}
	g.counts[ev.Stream]++
	g.seq++
	return ev
}

// NextOffset is the schedule offset of the event Next will return.
func (g *Generator) NextOffset() time.Duration {
	return time.Duration(g.offset * float64(time.Second)).Truncate(time.Millisecond)
}

// Take generates the next n events.
func (g *Generator) Take(n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = g.Next()
	}
	return evs
}

// All yields events until the consumer stops.
func (g *Generator) All() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for yield(g.Next()) {
		}
	}
}

func streamOf(v schemas.Event) Stream {
	switch v.(type) {
	case schemas.ClickEvent:
		return Clicks
	case schemas.CartEvent:
		return Carts
	case schemas.InventoryEvent:
		return Inventory
	case schemas.PaymentEvent:
		return Payments
	case schemas.FulfillmentEvent:
		return Fulfillment
	case schemas.ProductEvent:
		return Products
	case schemas.TenantEvent:
		return Tenants
	}
	panic(fmt.Sprintf("gen: unknown event type %T", v))
}

func (g *Generator) id(prefix string) string {
	g.ids++
	return prefix + strconv.FormatUint(g.ids, 10)
}

func (g *Generator) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.rnd.Int64N(int64(hi-lo)+1))
}

// eventTime places an event emitted at now up to MaxDisorder in the past:
// most events are a little late, a few are as late as allowed. after is the
// event time of the causally preceding event, which this one must not
// precede. Whole milliseconds keep the disorder bound exact.
func (g *Generator) eventTime(now time.Duration, after time.Time) time.Time {
	t := g.cfg.Start.Add(now)
	if d := g.cfg.MaxDisorder.Milliseconds(); d > 0 {
		if g.rnd.Float64() < 0.8 {
			d /= 10
		}
		t = t.Add(-time.Duration(g.rnd.Int64N(d+1)) * time.Millisecond)
	}
	if !after.IsZero() && !t.After(after) {
		t = after.Add(time.Millisecond)
	}
	return t
}

// backgroundInventory is stock churn unrelated to carts: shrinkage and cycle
// counts on well-stocked skus, replenishment on the others.
func (g *Generator) backgroundInventory(now time.Duration) schemas.Event {
	ti := g.pickTenant()
	t := &g.tenants[ti]
	k := &t.skus[t.popularity.Uint64()]
	ev := schemas.InventoryEvent{
		EventID: g.id("ev-"), Tenant: t.name, SKU: k.id, WarehouseID: k.warehouse,
		EventTime: g.eventTime(now, time.Time{}),
	}
	switch {
	case k.stock >= 5 && g.rnd.IntN(4) > 0:
		ev.Kind, ev.Delta, ev.Reason = schemas.InventoryAdjust, -int32(1+g.rnd.IntN(2)), "shrinkage"
	case k.stock >= 5:
		ev.Kind, ev.Delta, ev.Reason = schemas.InventoryAdjust, int32(1+g.rnd.IntN(2)), "cycle_count"
	default:
		ev.Kind, ev.Delta, ev.Reason = schemas.InventoryRestock, int32(20+g.rnd.IntN(180)), "replenishment"
	}
	k.stock += ev.Delta
	return ev
}

// sessionQueue orders pending sessions by due offset, then by the order in
// which they were queued, so that ties break deterministically. The keys sit
// in the slice, not behind the pointer: with 10^5 sessions pending, chasing
// pointers in Less dominated generation.
type sessionQueue []queued

type queued struct {
	due time.Duration
	tie uint64
	s   *session
}

func (q sessionQueue) Len() int { return len(q) }
func (q sessionQueue) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].tie < q[j].tie
}
func (q sessionQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *sessionQueue) Push(x any)   { *q = append(*q, x.(queued)) }
func (q *sessionQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = queued{}
	*q = old[:len(old)-1]
	return e
}
