package gen

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tidemark-streams/tidemark/schemas"
)

// tenant is one seller: a traffic share, a catalog with Zipf popularity and
// the stock the simulation tracks per sku.
type tenant struct {
	name       string
	weight     float64 // cumulative traffic share, for picking
	skus       []sku
	popularity *rand.Zipf
	warehouses []string
	tier       schemas.TenantTier
}

type sku struct {
	id        string
	title     string
	warehouse string
	// prices is the sku's price history in event time, sorted by from:
	// the listing price first, then every change the generator emitted
	// (a change may be emitted out of event-time order, within the
	// disorder bound). A cart event carries the price valid at its own
	// event time, which is what an as-of join looks up.
	prices []pricePoint
	stock  int32 // available, as the emitted inventory events sum to
}

type pricePoint struct {
	from  time.Time
	cents int64
}

// priceAt is the price valid at t: the last change at or before t.
func (k *sku) priceAt(t time.Time) int64 {
	i, _ := slices.BinarySearchFunc(k.prices, t, func(p pricePoint, t time.Time) int {
		if p.from.After(t) {
			return 1
		}
		return -1
	})
	return k.prices[max(i-1, 0)].cents
}

// setPrice records a change valid from t.
func (k *sku) setPrice(t time.Time, cents int64) {
	i, _ := slices.BinarySearchFunc(k.prices, t, func(p pricePoint, t time.Time) int {
		if p.from.After(t) {
			return 1
		}
		return -1
	})
	k.prices = slices.Insert(k.prices, i, pricePoint{from: t, cents: cents})
}

// newTenants builds the catalog. Tenant i's share of traffic and of the total
// catalog is proportional to 1/(i+1): one big seller and a long tail, which is
// what multi-tenant isolation has to cope with.
func newTenants(r *rand.Rand, cfg Config) []tenant {
	var total float64
	for i := range cfg.Tenants {
		total += 1 / float64(i+1)
	}
	ts := make([]tenant, cfg.Tenants)
	var cum float64
	for i := range ts {
		share := 1 / float64(i+1) / total
		cum += share
		t := &ts[i]
		t.name = "seller-" + pad(i+1, 3)
		t.weight = cum
		for w := range 1 + i%3 {
			t.warehouses = append(t.warehouses, t.name+"-wh-"+strconv.Itoa(w+1))
		}
		n := max(1, int(share*float64(cfg.SKUsPerTenant*cfg.Tenants)+0.5))
		t.skus = make([]sku, n)
		for j := range t.skus {
			t.skus[j] = sku{
				id:        t.name + "-sku-" + pad(j+1, 5),
				title:     productTitles[r.IntN(len(productTitles))],
				warehouse: t.warehouses[j%len(t.warehouses)],
				prices:    []pricePoint{{from: listedAt(cfg), cents: 199 + r.Int64N(49800)}},
			}
		}
		t.popularity = rand.NewZipf(r, cfg.SKUSkew, 1, uint64(n-1))
		t.tier = tierSymbols[i%len(tierSymbols)]
	}
	ts[len(ts)-1].weight = 1
	return ts
}

func (g *Generator) pickTenant() int {
	x := g.rnd.Float64()
	for i := range g.tenants {
		if x < g.tenants[i].weight {
			return i
		}
	}
	return len(g.tenants) - 1
}

// pad formats n with at least width digits, so ids sort like their numbers
// in listings.
func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

var (
	tierSymbols   = []schemas.TenantTier{schemas.TierPremium, schemas.TierPlus, schemas.TierStandard}
	productTitles = []string{"Desk lamp", "Water bottle", "Running shoes", "Phone case", "Coffee beans",
		"Notebook", "Backpack", "Headphones", "Yoga mat", "Tea kettle", "Board game", "Sunglasses"}
)

// listedAt is the event time of the listing: before the first activity
// event can be (Start − MaxDisorder), so every cart finds its sku's price.
func listedAt(cfg Config) time.Time {
	return cfg.Start.Add(-max(cfg.MaxDisorder, 0) - time.Second)
}

// listing is the catalog as events: each tenant, then each sku with its
// listing price.
func (g *Generator) listing() []schemas.Event {
	at := listedAt(g.cfg)
	var evs []schemas.Event
	for i := range g.tenants {
		t := &g.tenants[i]
		evs = append(evs, schemas.TenantEvent{EventID: g.id("ev-"), Tenant: t.name,
			DisplayName: "Seller " + pad(i+1, 3), Tier: t.tier, EventTime: at})
	}
	for i := range g.tenants {
		t := &g.tenants[i]
		for j := range t.skus {
			evs = append(evs, t.skus[j].listed(g.id("ev-"), t.name, at))
		}
	}
	return evs
}

func (k *sku) listed(id, tenant string, at time.Time) schemas.ProductEvent {
	return schemas.ProductEvent{EventID: id, Tenant: tenant, SKU: k.id, Title: k.title,
		PriceCents: k.priceAt(at), Currency: "USD", EventTime: at}
}

// priceChange reprices a popular sku by up to ±20%. The change is valid
// from the event-time frontier (no event emitted so far is later), so the price history a cart event is priced from when it is
// generated is the history as it will ever be at that cart's time: an
// as-of lookup is exact, while a latest-value lookup is wrong for the
// out-of-order carts emitted after a change but timed before it.
func (g *Generator) priceChange(now time.Duration) schemas.Event {
	t := &g.tenants[g.pickTenant()]
	k := &t.skus[t.popularity.Uint64()]
	at := g.cfg.Start.Add(now)
	old := k.priceAt(at)
	cents := max(99, old+old*int64(g.rnd.IntN(41)-20)/100)
	if cents == old {
		cents++
	}
	k.setPrice(at, cents)
	return k.listed(g.id("ev-"), t.name, at)
}

// tierChange moves a seller to another tier.
func (g *Generator) tierChange(now time.Duration) schemas.Event {
	i := g.pickTenant()
	t := &g.tenants[i]
	next := tierSymbols[(slices.Index(tierSymbols, t.tier)+1+g.rnd.IntN(len(tierSymbols)-1))%len(tierSymbols)]
	t.tier = next
	return schemas.TenantEvent{EventID: g.id("ev-"), Tenant: t.name, DisplayName: "Seller " + pad(i+1, 3),
		Tier: next, EventTime: g.eventTime(now, time.Time{})}
}

// cartPrice is the unit price a cart event at ts carries: the price valid
// then, or, with probability StalePriceRate, the one before it (a shopper
// on a page cached from before the last change): what a price check
// flags.
func (g *Generator) cartPrice(k *sku, ts time.Time) int64 {
	p := k.priceAt(ts)
	if g.cfg.StalePriceRate > 0 && g.rnd.Float64() < g.cfg.StalePriceRate {
		i, _ := slices.BinarySearchFunc(k.prices, ts, func(p pricePoint, t time.Time) int {
			if p.from.After(t) {
				return 1
			}
			return -1
		})
		if i >= 2 {
			return k.prices[i-2].cents
		}
	}
	return p
}
