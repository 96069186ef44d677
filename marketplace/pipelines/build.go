package pipelines

import (
	"fmt"
	"strings"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Names of the pipelines, as Build and `tidemark run --pipelines` take them.
const (
	Inventory = "inventory"
	Fraud     = "fraud"
	Orders    = "orders"
	Pricing   = "pricing"
)

// All lists every pipeline.
var All = []string{Inventory, Fraud, Orders, Pricing}

// Store names, stable: they name the changelog topics
// "<application>-<store>-changelog" and the query paths /stores/<store>/.
const (
	StoreAvailability = "inventory-availability"
	StoreVelocity     = "payment-velocity"
	StorePaymentDedup = "payment-dedup"
	StoreCarts        = "checkout-join" // the window stores checkout-join-this/-other
	StoreOrderState   = "order-state"
	StoreShipDeadline = "ship-deadline"

	StorePrices           = "product-prices"   // versioned table of the products topic
	StoreTenants          = "tenants"          // global table of the tenants topic
	StoreCartLines        = "cart-lines"       // running quantity per cart line, with a TTL
	StoreCartLinePrices   = "cart-line-prices" // the foreign-key join of lines to prices
	StoreCartTotals       = "cart-totals"
	StoreCartTotalsBuffer = "cart-totals-suppress"
	StoreTenantActivity   = "tenant-activity"
)

// ParseNames reads a comma-separated pipeline list ("inventory,fraud"),
// rejecting unknown and repeated names. Empty means all.
func ParseNames(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return append([]string(nil), All...), nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		switch n {
		case Inventory, Fraud, Orders, Pricing:
		default:
			return nil, fmt.Errorf("pipeline %q: want one of %s", n, strings.Join(All, ", "))
		}
		for _, o := range out {
			if o == n {
				return nil, fmt.Errorf("pipeline %q listed twice", n)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// Build returns one topology with application id app running the named
// pipelines (nil or empty: all of them) under cfg.
func Build(app string, names []string, cfg Config) (*topology.Topology, error) {
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = All
	}
	b := topology.NewBuilder(app, topology.RequireNamedState())
	if err := AddTo(b, names, cfg); err != nil {
		return nil, err
	}
	topo, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("pipelines: build %v: %w", names, err)
	}
	return topo, nil
}

// AddTo adds the named pipelines to b, e.g. beside your own operators. It
// creates the source streams of the input topics, so b must not read them
// already; call it once per builder.
func AddTo(b *topology.Builder, names []string, cfg Config) error {
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return err
	}
	if len(names) == 0 {
		names = All
	}
	in := newInputs(b, cfg, names)
	for _, n := range names {
		switch n {
		case Inventory:
			addInventory(b, in, cfg)
		case Fraud:
			addFraud(in, cfg)
		case Orders:
			addOrders(in, cfg)
		case Pricing:
			if err := addPricing(b, in, cfg); err != nil {
				return err
			}
		default:
			return fmt.Errorf("pipelines: unknown pipeline %q (want %s)", n, strings.Join(All, ", "))
		}
	}
	return nil
}

// Topics lists the input and output topics the named pipelines read and
// write, for creating them before the App runs.
func Topics(names []string, cfg Config) ([]string, error) {
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = All
	}
	var out []string
	add := func(ts ...string) {
		for _, t := range ts {
			dup := false
			for _, o := range out {
				dup = dup || o == t
			}
			if !dup {
				out = append(out, t)
			}
		}
	}
	for _, n := range names {
		switch n {
		case Inventory:
			add(cfg.Inputs.Inventory, cfg.Outputs.Availability)
		case Fraud:
			add(cfg.Inputs.Payments, cfg.Outputs.FraudAlerts)
		case Orders:
			add(cfg.Inputs.Carts, cfg.Inputs.Payments, cfg.Inputs.Fulfillment, cfg.Outputs.OrderState, cfg.Outputs.LateAlerts)
		case Pricing:
			add(cfg.Inputs.Carts, cfg.Inputs.Payments, cfg.Inputs.Products, cfg.Inputs.Tenants, cfg.Outputs.PriceAlerts,
				cfg.Outputs.CartLines, cfg.Outputs.CartTotals, cfg.Outputs.TenantActivity)
		}
	}
	return out, nil
}

// inputs are the source streams, created once per topic: two pipelines
// reading payments share one source, as a topic may feed only one source
// node per topology.
type inputs struct {
	inventory   topology.Stream[string, schemas.InventoryEvent]
	carts       topology.Stream[string, schemas.CartEvent]
	payments    topology.Stream[string, schemas.PaymentEvent]
	fulfillment topology.Stream[string, schemas.FulfillmentEvent]
	vs          gen.Serdes
}

func newInputs(b *topology.Builder, cfg Config, names []string) inputs {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	// Every source names its records' tenant (the seller) from the
	// schema's tenant field, so outputs, staleness and the commit
	// controller's per-tenant targets are accounted per seller. A
	// tombstone's value is the zero event: tenant "".
	src := func(name string, tenant topology.SourceOption) []topology.SourceOption {
		opts := []topology.SourceOption{topology.Named(name), tenant}
		if cfg.SkipUndecodable {
			opts = append(opts, topology.SkipUndecodable())
		}
		return opts
	}
	vs := gen.Serdes{Cart: schemas.Cart.Avro(), Inventory: schemas.Inventory.Avro(), Payment: schemas.Payment.Avro(),
		Fulfillment: schemas.Fulfillment.Avro()}
	if s := cfg.Serdes; s != nil {
		vs = *s
	}
	var in inputs
	if want[Inventory] {
		in.inventory = b.Stream(cfg.Inputs.Inventory, serde.String(), vs.Inventory, src("inventory-events", topology.WithTenant(func(_ string, e schemas.InventoryEvent) string { return e.Tenant }))...)
	}
	in.vs = vs
	if want[Fraud] || want[Orders] || want[Pricing] {
		// Redelivered payment events (same event id) would count twice in
		// the fraud velocity and repeat order updates. A redelivery has
		// the original's key (the order id), so it is in the same
		// partition: no repartition by id is needed.
		in.payments = b.Stream(cfg.Inputs.Payments, serde.String(), vs.Payment, src("payment-events", topology.WithTenant(func(_ string, e schemas.PaymentEvent) string { return e.Tenant }))...).
			Deduplicate(func(_ string, p schemas.PaymentEvent) string { return p.EventID }, cfg.PaymentDedupWindow,
				topology.Named(StorePaymentDedup))
	}
	if want[Orders] || want[Pricing] {
		in.carts = b.Stream(cfg.Inputs.Carts, serde.String(), vs.Cart, src("cart-events", topology.WithTenant(func(_ string, e schemas.CartEvent) string { return e.Tenant }))...)
	}
	if want[Orders] {
		in.fulfillment = b.Stream(cfg.Inputs.Fulfillment, serde.String(), vs.Fulfillment, src("fulfillment-events", topology.WithTenant(func(_ string, e schemas.FulfillmentEvent) string { return e.Tenant }))...)
	}
	return in
}
