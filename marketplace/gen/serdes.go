package gen

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
)

// Serdes encodes each stream's values. Set Config.Serdes to override
// Config.Format, e.g. with RegistrySerdes for the Confluent wire format.
type Serdes struct {
	Click       serde.Serde[schemas.ClickEvent]
	Cart        serde.Serde[schemas.CartEvent]
	Inventory   serde.Serde[schemas.InventoryEvent]
	Payment     serde.Serde[schemas.PaymentEvent]
	Fulfillment serde.Serde[schemas.FulfillmentEvent]
	// Product and Tenant may be nil: plain Avro with the embedded schemas.
	Product serde.Serde[schemas.ProductEvent]
	Tenant  serde.Serde[schemas.TenantEvent]
}

func (s *Serdes) validate() error {
	var missing []string
	for _, f := range []struct {
		name string
		nil_ bool
	}{{"Click", s.Click == nil}, {"Cart", s.Cart == nil}, {"Inventory", s.Inventory == nil},
		{"Payment", s.Payment == nil}, {"Fulfillment", s.Fulfillment == nil}} {
		if f.nil_ {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("gen: Serdes.%v is nil; set all five or leave Config.Serdes nil", missing)
	}
	return nil
}

// RegistrySerdes registers the embedded schemas with a Schema Registry under
// the Confluent subject names "<topic>-value" and returns serdes that write
// the wire format with those ids.
func RegistrySerdes(ctx context.Context, reg *schemas.Registry, topics Topics) (*Serdes, error) {
	topics = Config{Topics: topics}.withDefaults().Topics
	var s Serdes
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	if s.Click, err = registry(ctx, schemas.Click, reg, topics.Clicks); err != nil {
		add(err)
	}
	if s.Cart, err = registry(ctx, schemas.Cart, reg, topics.Carts); err != nil {
		add(err)
	}
	if s.Inventory, err = registry(ctx, schemas.Inventory, reg, topics.Inventory); err != nil {
		add(err)
	}
	if s.Payment, err = registry(ctx, schemas.Payment, reg, topics.Payments); err != nil {
		add(err)
	}
	if s.Fulfillment, err = registry(ctx, schemas.Fulfillment, reg, topics.Fulfillment); err != nil {
		add(err)
	}
	if s.Product, err = schemas.ProductAvro(serde.WithRegistry(reg.Client(), topics.Products+"-value")); err != nil {
		add(err)
	}
	if s.Tenant, err = schemas.TenantAvro(serde.WithRegistry(reg.Client(), topics.Tenants+"-value")); err != nil {
		add(err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &s, nil
}

func registry[T schemas.Event](ctx context.Context, spec *schemas.Spec[T], reg *schemas.Registry, topic string) (serde.Serde[T], error) {
	s, err := spec.Registry(ctx, reg, topic+"-value")
	if err != nil {
		return nil, err
	}
	return s, nil
}
