package gen

import (
	"fmt"
	"time"
)

// DefaultStart is the event-time origin when Config.Start is zero: fixed, so
// that a seed alone determines the stream.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Format is the encoding of record values.
type Format string

const (
	FormatAvro Format = "avro" // plain Avro binary with the embedded schemas
	FormatJSON Format = "json"
)

// Topics names the topic of each stream.
type Topics struct {
	Clicks, Carts, Inventory, Payments, Fulfillment string
	// Products (sku listings and price changes) and Tenants (sellers) are
	// the catalog: reference data rather than activity.
	Products, Tenants string
}

// DefaultTopics are the topic names when Config.Topics fields are empty.
var DefaultTopics = Topics{Clicks: "clicks", Carts: "carts", Inventory: "inventory", Payments: "payments",
	Fulfillment: "fulfillment", Products: "products", Tenants: "tenants"}

// WithPrefix returns the topics with prefix prepended to each name.
func (t Topics) WithPrefix(prefix string) Topics {
	return Topics{Clicks: prefix + t.Clicks, Carts: prefix + t.Carts, Inventory: prefix + t.Inventory,
		Payments: prefix + t.Payments, Fulfillment: prefix + t.Fulfillment, Products: prefix + t.Products, Tenants: prefix + t.Tenants}
}

// All lists the topic names in Stream order.
func (t Topics) All() []string {
	return []string{t.Clicks, t.Carts, t.Inventory, t.Payments, t.Fulfillment, t.Products, t.Tenants}
}

// Config describes a stream. The zero value of every field means its
// documented default, so Config{Seed: 7} is a complete configuration.
type Config struct {
	// Seed fixes every random choice. Default 0 is a valid seed.
	Seed uint64
	// Start is the event-time origin; default DefaultStart. It is truncated
	// to milliseconds, the precision of the schemas. The first events may
	// be up to MaxDisorder earlier, like every other event.
	Start time.Time
	// Profile is the rate schedule, in events per second over all topics.
	Profile Profile
	// Tenants is the number of sellers, 1..10000, default 8. Tenant i gets a
	// traffic share proportional to 1/(i+1) and a catalog to match.
	Tenants int
	// Users is the size of the user population, 1..100000000, default 10000.
	Users int
	// SKUsPerTenant is the mean catalog size, 1..1000000, default 200.
	SKUsPerTenant int
	// SKUSkew and UserSkew are the Zipf exponents (> 1) of product and user
	// popularity; defaults 1.2 and 1.1.
	SKUSkew, UserSkew float64
	// MaxDisorder bounds how far behind the stream's event-time frontier an
	// event may be, 0..1h, default 2s. Use NoDisorder for in-order time.
	MaxDisorder time.Duration
	// OversellRate is the probability, 0..1, that a reserve which stock
	// cannot cover is emitted without a restock first; default 0.02. Use a
	// negative value for "never".
	OversellRate float64
	// PriceChangeRate is the share of events, 0..0.5, that reprice a sku
	// (a ProductEvent valid from its event time); default 0.003. Use a
	// negative value for "never".
	PriceChangeRate float64
	// StalePriceRate is the probability, 0..1, that a cart add carries
	// the sku's price from before its latest change (a cached page),
	// which a price check flags; default 0.01, negative for "never".
	StalePriceRate float64
	// TierChangeRate is the share of events, 0..0.5, that move a seller
	// to another tier; default 0.0005, negative for "never".
	TierChangeRate float64
	// Topics overrides the topic names; empty fields keep DefaultTopics.
	Topics Topics
	// Format is the value encoding, default FormatAvro.
	Format Format
	// Serdes, if set, encodes values instead of Format.
	Serdes *Serdes
}

// NoDisorder as Config.MaxDisorder emits event times in order.
const NoDisorder = time.Duration(-1)

func (c Config) withDefaults() Config {
	if c.Start.IsZero() {
		c.Start = DefaultStart
	}
	c.Start = c.Start.Truncate(time.Millisecond).UTC()
	c.Profile = c.Profile.withDefaults()
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Tenants, 8)
	def(&c.Users, 10000)
	def(&c.SKUsPerTenant, 200)
	if c.SKUSkew == 0 {
		c.SKUSkew = 1.2
	}
	if c.UserSkew == 0 {
		c.UserSkew = 1.1
	}
	switch {
	case c.MaxDisorder == 0:
		c.MaxDisorder = 2 * time.Second
	case c.MaxDisorder == NoDisorder:
		c.MaxDisorder = 0
	}
	switch {
	case c.OversellRate == 0:
		c.OversellRate = 0.02
	case c.OversellRate < 0:
		c.OversellRate = 0
	}
	rate := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	rate(&c.PriceChangeRate, 0.003)
	rate(&c.StalePriceRate, 0.01)
	rate(&c.TierChangeRate, 0.0005)
	t := &c.Topics
	for _, p := range []struct {
		v *string
		d string
	}{
		{&t.Clicks, DefaultTopics.Clicks}, {&t.Carts, DefaultTopics.Carts}, {&t.Inventory, DefaultTopics.Inventory},
		{&t.Payments, DefaultTopics.Payments}, {&t.Fulfillment, DefaultTopics.Fulfillment},
		{&t.Products, DefaultTopics.Products}, {&t.Tenants, DefaultTopics.Tenants},
	} {
		if *p.v == "" {
			*p.v = p.d
		}
	}
	if c.Format == "" {
		c.Format = FormatAvro
	}
	return c
}

// Validate checks the configuration after defaults apply; errors name the
// field and its accepted range.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.Profile.Validate(); err != nil {
		return err
	}
	intIn := func(name string, v, lo, hi int) error {
		if v < lo || v > hi {
			return fmt.Errorf("gen: %s is %d, accepted range %d..%d", name, v, lo, hi)
		}
		return nil
	}
	for _, err := range []error{
		intIn("Tenants", c.Tenants, 1, 10000),
		intIn("Users", c.Users, 1, 100_000_000),
		intIn("SKUsPerTenant", c.SKUsPerTenant, 1, 1_000_000),
	} {
		if err != nil {
			return err
		}
	}
	if !(c.SKUSkew > 1 && c.SKUSkew <= 10) {
		return fmt.Errorf("gen: SKUSkew is %v, accepted range (1, 10]", c.SKUSkew)
	}
	if !(c.UserSkew > 1 && c.UserSkew <= 10) {
		return fmt.Errorf("gen: UserSkew is %v, accepted range (1, 10]", c.UserSkew)
	}
	if c.MaxDisorder < 0 || c.MaxDisorder > time.Hour {
		return fmt.Errorf("gen: MaxDisorder is %v, accepted range 0..1h", c.MaxDisorder)
	}
	if !(c.OversellRate >= 0 && c.OversellRate <= 1) {
		return fmt.Errorf("gen: OversellRate is %v, accepted range 0..1", c.OversellRate)
	}
	for _, r := range []struct {
		name   string
		v, max float64
	}{{"PriceChangeRate", c.PriceChangeRate, 0.5}, {"StalePriceRate", c.StalePriceRate, 1}, {"TierChangeRate", c.TierChangeRate, 0.5}} {
		if !(r.v >= 0 && r.v <= r.max) {
			return fmt.Errorf("gen: %s is %v, accepted range 0..%v", r.name, r.v, r.max)
		}
	}
	if c.Serdes != nil {
		if err := c.Serdes.validate(); err != nil {
			return err
		}
	} else if c.Format != FormatAvro && c.Format != FormatJSON {
		return fmt.Errorf("gen: Format is %q, accepted %q or %q", c.Format, FormatAvro, FormatJSON)
	}
	seen := map[string]bool{}
	for _, name := range c.Topics.All() {
		if seen[name] {
			return fmt.Errorf("gen: topic %q is used by two streams; each stream needs its own topic", name)
		}
		seen[name] = true
	}
	return nil
}
