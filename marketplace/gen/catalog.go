package gen

import (
	"math/rand/v2"
	"strconv"
)

// tenant is one seller: a traffic share, a catalog with Zipf popularity and
// the stock the simulation tracks per sku.
type tenant struct {
	name       string
	weight     float64 // cumulative traffic share, for picking
	skus       []sku
	popularity *rand.Zipf
	warehouses []string
}

type sku struct {
	id        string
	warehouse string
	price     int64 // cents
	stock     int32 // available, as the emitted inventory events sum to
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
				warehouse: t.warehouses[j%len(t.warehouses)],
				price:     199 + r.Int64N(49800),
			}
		}
		t.popularity = rand.NewZipf(r, cfg.SKUSkew, 1, uint64(n-1))
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
