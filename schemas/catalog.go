package schemas

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// The catalog events are reference data rather than activity: every sku's
// listing and price history, every seller's tier. Unlike the five activity
// events, whose hand-written codecs are tuned for the hot path, they are
// encoded by serde.Avro, the generic codec users get for their own types:
// the marketplace uses it the way a user's pipeline would.
const (
	TypeProduct EventType = "ProductEvent"
	TypeTenant  EventType = "TenantEvent"
)

// TenantTier is a seller's service tier.
type TenantTier string

const (
	TierStandard TenantTier = "standard"
	TierPlus     TenantTier = "plus"
	TierPremium  TenantTier = "premium"
)

var tierSymbols = []TenantTier{TierStandard, TierPlus, TierPremium}

// ProductEvent lists SKU at PriceCents from EventTime until the sku's next
// ProductEvent. Key: SKU.
type ProductEvent struct {
	EventID    string    `json:"event_id" avro:"event_id"`
	Tenant     string    `json:"tenant" avro:"tenant"`
	SKU        string    `json:"sku" avro:"sku"`
	Title      string    `json:"title" avro:"title"`
	PriceCents int64     `json:"price_cents" avro:"price_cents"`
	Currency   string    `json:"currency" avro:"currency"`
	EventTime  time.Time `json:"event_time" avro:"event_time"`
}

// TenantEvent is a seller's account as of EventTime. Key: Tenant.
type TenantEvent struct {
	EventID     string     `json:"event_id" avro:"event_id"`
	Tenant      string     `json:"tenant" avro:"tenant"`
	DisplayName string     `json:"display_name" avro:"display_name"`
	Tier        TenantTier `json:"tier" avro:"tier"`
	EventTime   time.Time  `json:"event_time" avro:"event_time"`
}

func (ProductEvent) Type() EventType { return TypeProduct }
func (TenantEvent) Type() EventType  { return TypeTenant }

func (e ProductEvent) Key() string { return e.SKU }
func (e TenantEvent) Key() string  { return e.Tenant }

func (e ProductEvent) Time() time.Time { return e.EventTime }
func (e TenantEvent) Time() time.Time  { return e.EventTime }

func (e ProductEvent) Validate() error {
	v := validator{typ: TypeProduct}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("sku", e.SKU)
	v.required("title", e.Title)
	v.check(e.PriceCents >= 0, "price_cents", "is %d, must not be negative", e.PriceCents)
	v.required("currency", e.Currency)
	v.time(e.EventTime)
	return v.err
}

func (e TenantEvent) Validate() error {
	v := validator{typ: TypeTenant}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("display_name", e.DisplayName)
	v.check(oneOf(e.Tier, tierSymbols...), "tier", "is %q, not a TenantTier", e.Tier)
	v.time(e.EventTime)
	return v.err
}

// ProductSchema and TenantSchema are the embedded Avro schemas (JSON).
var (
	ProductSchema = mustRead("product.avsc")
	TenantSchema  = mustRead("tenant.avsc")
)

func mustRead(file string) string {
	b, err := Files.ReadFile(file)
	if err != nil {
		panic(fmt.Sprintf("schemas: read embedded %s: %v", file, err))
	}
	return string(b)
}

// ProductAvro and TenantAvro encode plain Avro binary with the embedded
// schemas; pass serde.WithRegistry for the Confluent wire format.
func ProductAvro(opts ...serde.AvroOption) (serde.Serde[ProductEvent], error) {
	s, err := serde.Avro[ProductEvent](ProductSchema, opts...)
	if err != nil {
		return nil, fmt.Errorf("schemas: product serde: %w", err)
	}
	return validating[ProductEvent]{s}, nil
}

func TenantAvro(opts ...serde.AvroOption) (serde.Serde[TenantEvent], error) {
	s, err := serde.Avro[TenantEvent](TenantSchema, opts...)
	if err != nil {
		return nil, fmt.Errorf("schemas: tenant serde: %w", err)
	}
	return validating[TenantEvent]{s}, nil
}

// ProductJSON and TenantJSON are encoding/json with the structs' tags;
// Decode validates.
func ProductJSON() serde.Serde[ProductEvent] { return jsonSerde[ProductEvent]{} }
func TenantJSON() serde.Serde[TenantEvent]   { return jsonSerde[TenantEvent]{} }

// validating rejects decoded events that break their invariants, as the
// activity events' serdes do, so a pipeline never sees an invalid one.
type validating[T Event] struct{ serde.Serde[T] }

func (v validating[T]) Encode(dst []byte, e T) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, fmt.Errorf("schemas: encode: %w", err)
	}
	return v.Serde.Encode(dst, e)
}

func (v validating[T]) Decode(b []byte) (T, error) {
	e, err := v.Serde.Decode(b)
	if err != nil {
		return e, err
	}
	return validDecoded(e)
}
