package pipelines_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/task"
)

// pricingReference is what the pricing pipeline must output, computed from
// the events in the order they are piped, with maps and loops.
type pricingReference struct {
	alerts   map[string]pipelines.PriceAlert     // by priceAlertKey
	lines    map[string]pipelines.PricedLine     // final table, by line key
	totals   map[string]pipelines.CartTotal      // by cart id, carts with at least one priced line
	settled  map[string]bool                     // carts whose total is out of the suppress buffer by the end
	activity map[string]pipelines.TenantActivity // by activityKey, closed windows
}

func priceAlertKey(a pipelines.PriceAlert) string {
	return fmt.Sprintf("%s/%s@%d", a.CartID, a.SKU, a.TimeMs)
}
func activityKey(a pipelines.TenantActivity) string {
	return fmt.Sprintf("%s@%d", a.Tenant, a.WindowStartMs)
}

type pricePoint struct {
	from  int64
	cents int64
	title string
}

// asOf is the price valid at ts among the versions known so far.
func asOf(h []pricePoint, ts int64) (pricePoint, bool) {
	var best pricePoint
	found := false
	for _, p := range h {
		if p.from <= ts && (!found || p.from >= best.from) {
			best, found = p, true
		}
	}
	return best, found
}

// latestPrice is the version with the greatest timestamp (the latest one
// the versioned table keeps as current).
func latestPrice(h []pricePoint) (pricePoint, bool) {
	return asOf(h, 1<<62)
}

func computePricing(evs []gen.Event, cfg pipelines.Config, end time.Time) pricingReference {
	cfg.EnsureDefaults()
	ref := pricingReference{alerts: map[string]pipelines.PriceAlert{}, lines: map[string]pipelines.PricedLine{},
		totals: map[string]pipelines.CartTotal{}, settled: map[string]bool{}, activity: map[string]pipelines.TenantActivity{}}
	prices := map[string][]pricePoint{}
	tiers := map[string]schemas.TenantTier{}
	qty := map[string]pipelines.LineQuantity{}
	cartChanged := map[string]int64{}
	win := cfg.TenantActivityWindow.Milliseconds()
	activity := func(tenant string, ts int64, f func(*pipelines.TenantActivity)) {
		start := ts - ts%win
		k := fmt.Sprintf("%s@%d", tenant, start)
		a := ref.activity[k]
		a.Tenant, a.WindowStartMs, a.WindowEndMs = tenant, start, start+win
		f(&a)
		ref.activity[k] = a
	}
	for _, ev := range evs {
		switch v := ev.Value.(type) {
		case schemas.ProductEvent:
			prices[v.SKU] = append(prices[v.SKU], pricePoint{from: v.EventTime.UnixMilli(), cents: v.PriceCents, title: v.Title})
		case schemas.TenantEvent:
			tiers[v.Tenant] = v.Tier
		case schemas.CartEvent:
			ts := v.EventTime.UnixMilli()
			if v.Action == schemas.CartAdd {
				if p, ok := asOf(prices[v.SKU], ts); ok && p.cents != v.UnitPriceCents {
					a := pipelines.PriceAlert{CartID: v.CartID, SKU: v.SKU, Tenant: v.Tenant, TenantTier: string(tiers[v.Tenant]),
						CartPriceCents: v.UnitPriceCents, CatalogPriceCents: p.cents, TimeMs: ts}
					ref.alerts[priceAlertKey(a)] = a
				}
				activity(v.Tenant, ts, func(a *pipelines.TenantActivity) { a.CartAdds++; a.UnitsAdded += int64(v.Quantity) })
			}
			k := pipelines.LineKey(v.CartID, v.SKU)
			qty[k] = qty[k].Apply(v)
			cartChanged[v.CartID] = max(cartChanged[v.CartID], ts)
		case schemas.PaymentEvent:
			if v.Status == schemas.PaymentCaptured {
				activity(v.Tenant, v.EventTime.UnixMilli(), func(a *pipelines.TenantActivity) { a.Captures++; a.CapturedCents += v.AmountCents })
			}
		}
	}
	for k, l := range qty {
		p, ok := latestPrice(prices[l.SKU])
		if l.Quantity <= 0 || !ok {
			continue
		}
		line := pipelines.PricedLine{CartID: l.CartID, SKU: l.SKU, Title: p.title, Quantity: l.Quantity,
			UnitPriceCents: p.cents, TotalCents: l.Quantity * p.cents}
		ref.lines[k] = line
		t := ref.totals[l.CartID]
		t.Lines++
		t.Units += line.Quantity
		t.TotalCents += line.TotalCents
		ref.totals[l.CartID] = t
	}
	// A cart's last total leaves the suppress buffer once stream time is
	// CartTotalsEvery past its first buffered change; with ten seconds to
	// spare, changes that old have surely been flushed by end.
	for cart, ts := range cartChanged {
		if ts+cfg.CartTotalsEvery.Milliseconds()+10_000 <= end.UnixMilli() {
			ref.settled[cart] = true
		}
	}
	closed := end.UnixMilli() - cfg.Grace.Milliseconds()
	for k, a := range ref.activity {
		if a.WindowEndMs > closed {
			delete(ref.activity, k)
		}
	}
	return ref
}

// pricingFlush are events after the stream that advance the stream time of
// every pricing task past every window and suppression of the stream: cart
// adds of real skus at their correct prices (no alert) whose carts, lines,
// skus and tenants cover every partition of each repartition topic, and a
// capture per tenant partition. They are ordinary input: the reference
// counts them like any other event.
func pricingFlush(evs []gen.Event, cfg pipelines.Config, partitions int32) (flush []gen.Event, end time.Time) {
	cfg.EnsureDefaults()
	var last time.Time
	prices := map[string]int64{}
	var skus []schemas.ProductEvent
	for _, ev := range evs {
		last = maxTime(last, ev.Time())
		if p, ok := ev.Value.(schemas.ProductEvent); ok {
			if _, seen := prices[p.SKU]; !seen {
				skus = append(skus, p)
			}
			prices[p.SKU] = p.PriceCents
		}
	}
	end = last.Add(cfg.TenantActivityWindow + cfg.Grace + time.Minute)
	need := func(key string, covered map[int32]bool) bool {
		p := task.DefaultPartition([]byte(key), partitions)
		if covered[p] {
			return false
		}
		covered[p] = true
		return true
	}
	carts, lines, bySKU, tenants := map[int32]bool{}, map[int32]bool{}, map[int32]bool{}, map[int32]bool{}
	for i := 0; ; i++ {
		full := func(m map[int32]bool) bool { return int32(len(m)) == partitions }
		if full(carts) && full(lines) && full(bySKU) && full(tenants) {
			break
		}
		sku := skus[i%len(skus)]
		cart := fmt.Sprintf("%s-cart-%d", markerPrefix, i)
		tenant := fmt.Sprintf("%s-tenant-%d", markerPrefix, i)
		useful := slices.Contains([]bool{need(cart, carts), need(pipelines.LineKey(cart, sku.SKU), lines),
			need(sku.SKU, bySKU), need(tenant, tenants)}, true)
		if !useful {
			continue
		}
		flush = append(flush, gen.Event{Stream: gen.Carts, Value: schemas.CartEvent{EventID: cart, Tenant: tenant, CartID: cart,
			UserID: cart, SKU: sku.SKU, Action: schemas.CartAdd, Quantity: 1, UnitPriceCents: prices[sku.SKU], Currency: "USD",
			EventTime: end}})
		flush = append(flush, gen.Event{Stream: gen.Payments, Value: schemas.PaymentEvent{EventID: cart + "-pay", Tenant: tenant,
			PaymentID: cart, OrderID: cart, CartID: cart, UserID: cart, Status: schemas.PaymentCaptured, AmountCents: prices[sku.SKU],
			Currency: "USD", Method: "card", EventTime: end}})
	}
	return flush, end
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
