package pipelines_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
)

// The pipelines' sources name the seller (the schema's tenant field) as the
// tenant: every availability update carries the tenant of the inventory
// event that caused it, a seller of that SKU.
func TestPipelineOutputsCarryTheSellersTenant(t *testing.T) {
	cfg := testConfig()
	cfg.EnsureDefaults()
	d, pipe := streamDriver(t, []string{pipelines.Inventory}, cfg, cfg.Inputs.Inventory)
	sellers := map[string]map[string]bool{} // sku -> tenants of its events
	tenants := map[string]bool{}
	for _, ev := range testStream(2000) {
		inv, ok := ev.Value.(schemas.InventoryEvent)
		if !ok || ev.Stream != gen.Inventory || !pipe(ev) {
			continue
		}
		if sellers[inv.SKU] == nil {
			sellers[inv.SKU] = map[string]bool{}
		}
		sellers[inv.SKU][inv.Tenant] = true
		tenants[inv.Tenant] = true
	}
	out, err := tidemarktest.Output(d, cfg.Outputs.Availability, serde.String(), pipelines.AvailabilitySerde()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 || len(tenants) < 2 {
		t.Fatalf("%d availability updates over %d tenants: stream too thin", len(out), len(tenants))
	}
	seen := map[string]int{}
	for _, r := range out {
		if !sellers[r.Key][r.Tenant] {
			t.Fatalf("availability of %s carries tenant %q, not a seller of it (%v)", r.Key, r.Tenant, sellers[r.Key])
		}
		seen[r.Tenant]++
	}
	t.Logf("availability updates per tenant: %v", seen)
}
