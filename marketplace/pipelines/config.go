package pipelines

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
)

// Outputs names the output topics. tidemark creates only internal topics:
// create these (and the inputs) before an App runs the pipelines.
type Outputs struct {
	Availability string // inventory: Availability per sku, one record per change
	FraudAlerts  string // fraud: FraudAlert per user and window
	OrderState   string // orders: OrderState per order id, one record per change
	LateAlerts   string // orders: LateFulfillment per captured order not shipped in time

	PriceAlerts    string // pricing: PriceAlert per cart add priced off the catalog
	CartLines      string // pricing: CartLine per cart line, one record per change
	CartTotals     string // pricing: CartTotal per cart, at most one per CartTotalsEvery
	TenantActivity string // pricing: TenantActivity per tenant and window
}

// DefaultOutputs are the output topic names when Config.Outputs fields are empty.
var DefaultOutputs = Outputs{
	Availability: "inventory-availability",
	FraudAlerts:  "fraud-alerts",
	OrderState:   "order-state",
	LateAlerts:   "late-fulfillment-alerts",

	PriceAlerts:    "price-alerts",
	CartLines:      "cart-lines",
	CartTotals:     "cart-totals",
	TenantActivity: "tenant-activity",
}

// All lists the output topics.
func (o Outputs) All() []string {
	return []string{o.Availability, o.FraudAlerts, o.OrderState, o.LateAlerts, o.PriceAlerts, o.CartLines, o.CartTotals, o.TenantActivity}
}

// WithPrefix returns the topics with prefix prepended to each name.
func (o Outputs) WithPrefix(prefix string) Outputs {
	return Outputs{Availability: prefix + o.Availability, FraudAlerts: prefix + o.FraudAlerts, OrderState: prefix + o.OrderState,
		LateAlerts: prefix + o.LateAlerts, PriceAlerts: prefix + o.PriceAlerts, CartLines: prefix + o.CartLines,
		CartTotals: prefix + o.CartTotals, TenantActivity: prefix + o.TenantActivity}
}

// Config parameterises the pipelines. Zero fields stand for the documented
// defaults: EnsureDefaults fills them in, Validate checks the result; Build,
// AddTo and Topics do both.
type Config struct {
	// Inputs are the generator's topics; empty fields keep gen.DefaultTopics.
	Inputs gen.Topics
	// Outputs; empty fields keep DefaultOutputs.
	Outputs Outputs

	// Grace is how far behind stream time an input may be and still count,
	// for every event-time operator. Default 5s, above the generator's
	// default disorder of 2s.
	Grace time.Duration

	// PaymentDedupWindow is how far apart in event time two payment
	// events with the same event id may be for the later to be dropped
	// as a redelivery (Stream.Deduplicate, store StorePaymentDedup),
	// before the fraud and order pipelines see them. Default 1h.
	PaymentDedupWindow time.Duration

	// FraudWindow and FraudAdvance shape the hopping windows of the fraud
	// signal; defaults 1m and 10s.
	FraudWindow, FraudAdvance time.Duration
	// FraudThreshold is the number of payment attempts in one window that
	// raises an alert (count ≥ threshold). Default 20.
	FraudThreshold int64

	// CheckoutWindow bounds the cart join: cart events at most this far
	// from the payment authorization belong to the order. Default 30m, well
	// above the longest shopping session the generator simulates.
	CheckoutWindow time.Duration
	// ShipWithin is the fulfillment deadline: a captured order with no
	// "shipped" event within ShipWithin after the capture (event time)
	// raises a LateFulfillment alert. Default 60s (the generator's time is
	// compressed: capture to shipment takes 15–90 s).
	ShipWithin time.Duration

	// PriceHistory is how long, in event time, the versioned price table
	// (StorePrices) keeps superseded prices for as-of lookups: a cart add
	// older than stream time − PriceHistory finds no price and raises no
	// alert. Default 10m or twice Grace, whichever is longer.
	PriceHistory time.Duration
	// CartTTL expires a cart line (StoreCartLines) this long in event time
	// after its last change: abandoned carts leave the store (and the
	// cart-lines output gets a tombstone). Default 30m.
	CartTTL time.Duration
	// CartTotalsEvery rate-limits cart totals: each cart's total is
	// emitted at most once per CartTotalsEvery of event time (Suppress),
	// with its latest value. Default 1s.
	CartTotalsEvery time.Duration
	// TenantActivityWindow is the tumbling window of the per-seller
	// activity summary; default 1m.
	TenantActivityWindow time.Duration

	// Serdes decodes the input values instead of plain Avro binary with
	// the embedded schemas; e.g. gen.RegistrySerdes for the Confluent wire
	// format, which resolves each record from its writer's schema id and
	// so recognises unknown ids and records of another event type. Only
	// Cart, Inventory, Payment and Fulfillment are used.
	Serdes *gen.Serdes

	// SkipUndecodable drops and counts input records the Avro serdes
	// cannot decode instead of failing the task. Leave it off to fail, or
	// to route such records to the App's dead-letter topic
	// (processor.WithDeadLetterTopic), which sees them only when the
	// source does not drop them.
	SkipUndecodable bool
}

// EnsureDefaults sets every zero field to its documented default and
// returns c. It checks nothing; see Validate.
func (c *Config) EnsureDefaults() *Config {
	in := &c.Inputs
	for _, p := range []struct {
		v *string
		d string
	}{
		{&in.Clicks, gen.DefaultTopics.Clicks}, {&in.Carts, gen.DefaultTopics.Carts},
		{&in.Inventory, gen.DefaultTopics.Inventory}, {&in.Payments, gen.DefaultTopics.Payments},
		{&in.Fulfillment, gen.DefaultTopics.Fulfillment},
		{&in.Products, gen.DefaultTopics.Products}, {&in.Tenants, gen.DefaultTopics.Tenants},
		{&c.Outputs.PriceAlerts, DefaultOutputs.PriceAlerts}, {&c.Outputs.CartLines, DefaultOutputs.CartLines},
		{&c.Outputs.CartTotals, DefaultOutputs.CartTotals}, {&c.Outputs.TenantActivity, DefaultOutputs.TenantActivity},
		{&c.Outputs.Availability, DefaultOutputs.Availability}, {&c.Outputs.FraudAlerts, DefaultOutputs.FraudAlerts},
		{&c.Outputs.OrderState, DefaultOutputs.OrderState}, {&c.Outputs.LateAlerts, DefaultOutputs.LateAlerts},
	} {
		if *p.v == "" {
			*p.v = p.d
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Grace, 5*time.Second)
	def(&c.PaymentDedupWindow, time.Hour)
	def(&c.FraudWindow, time.Minute)
	def(&c.FraudAdvance, 10*time.Second)
	def(&c.CheckoutWindow, 30*time.Minute)
	def(&c.ShipWithin, time.Minute)
	def(&c.PriceHistory, max(10*time.Minute, 2*c.Grace))
	def(&c.CartTTL, 30*time.Minute)
	def(&c.CartTotalsEvery, time.Second)
	def(&c.TenantActivityWindow, time.Minute)
	if c.FraudThreshold == 0 {
		c.FraudThreshold = 20
	}
	return c
}

// Validate checks c as Build would use it, zero fields standing for their
// defaults, and names the field at fault and its accepted range. It does
// not modify c.
func (c *Config) Validate() error {
	return c.ValidateNamed(nil)
}

// ValidateNamed is Validate naming each field as name(field) would, field
// being the Go field name ("ShipWithin"): a program that reads the
// parameters from its own configuration (tidemark run's ship_within)
// passes its keys, so that an error names what its user wrote. A nil
// name, or one that returns "", keeps the Go field name.
func (c *Config) ValidateNamed(name func(field string) string) error {
	d := *c
	return d.EnsureDefaults().check(func(field string) string {
		if name != nil {
			if n := name(field); n != "" {
				return n
			}
		}
		return field
	})
}

// check validates a Config whose defaults are filled in; n names a field.
func (c *Config) check(n func(string) string) error {
	in := &c.Inputs
	switch {
	case c.Grace < 0 || c.Grace > 24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 0..24h", n("Grace"), c.Grace)
	case c.PaymentDedupWindow < time.Second || c.PaymentDedupWindow > 24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..24h", n("PaymentDedupWindow"), c.PaymentDedupWindow)
	case c.FraudWindow < time.Second || c.FraudWindow > 24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..24h", n("FraudWindow"), c.FraudWindow)
	case c.FraudAdvance < time.Millisecond || c.FraudAdvance > c.FraudWindow:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1ms..%s (%v)", n("FraudAdvance"), c.FraudAdvance, n("FraudWindow"), c.FraudWindow)
	case c.FraudThreshold < 1:
		return fmt.Errorf("pipelines: %s is %d, must be ≥ 1", n("FraudThreshold"), c.FraudThreshold)
	case c.CheckoutWindow < time.Second || c.CheckoutWindow > 24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..24h", n("CheckoutWindow"), c.CheckoutWindow)
	case c.ShipWithin < time.Second || c.ShipWithin > 30*24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..720h", n("ShipWithin"), c.ShipWithin)
	case c.PriceHistory < c.Grace || c.PriceHistory > 30*24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range %s (%v)..720h", n("PriceHistory"), c.PriceHistory, n("Grace"), c.Grace)
	case c.CartTTL < time.Second || c.CartTTL > 30*24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..720h", n("CartTTL"), c.CartTTL)
	case c.CartTotalsEvery < time.Millisecond || c.CartTotalsEvery > time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1ms..1h", n("CartTotalsEvery"), c.CartTotalsEvery)
	case c.TenantActivityWindow < time.Second || c.TenantActivityWindow > 24*time.Hour:
		return fmt.Errorf("pipelines: %s is %v, accepted range 1s..24h", n("TenantActivityWindow"), c.TenantActivityWindow)
	}
	if s := c.Serdes; s != nil && (s.Cart == nil || s.Inventory == nil || s.Payment == nil || s.Fulfillment == nil) {
		return fmt.Errorf("pipelines: Serdes.Cart, .Inventory, .Payment and .Fulfillment must all be set")
	}
	seen := map[string]string{}
	for _, t := range []struct{ field, name string }{
		{"Inputs.Carts", in.Carts}, {"Inputs.Inventory", in.Inventory}, {"Inputs.Payments", in.Payments},
		{"Inputs.Fulfillment", in.Fulfillment}, {"Inputs.Products", in.Products}, {"Inputs.Tenants", in.Tenants},
		{"Outputs.Availability", c.Outputs.Availability},
		{"Outputs.FraudAlerts", c.Outputs.FraudAlerts}, {"Outputs.OrderState", c.Outputs.OrderState},
		{"Outputs.LateAlerts", c.Outputs.LateAlerts}, {"Outputs.PriceAlerts", c.Outputs.PriceAlerts},
		{"Outputs.CartLines", c.Outputs.CartLines}, {"Outputs.CartTotals", c.Outputs.CartTotals},
		{"Outputs.TenantActivity", c.Outputs.TenantActivity},
	} {
		if other, dup := seen[t.name]; dup {
			return fmt.Errorf("pipelines: %s and %s are both topic %q; every stream needs its own topic", other, t.field, t.name)
		}
		seen[t.name] = t.field
	}
	return nil
}
