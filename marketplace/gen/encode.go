package gen

import (
	"fmt"
	"iter"
	"time"

	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/serde"
)

// Record is an event encoded for Kafka.
type Record struct {
	Topic     string
	Key       []byte
	Value     []byte
	Timestamp time.Time // the event time, as the record's CreateTime
	Event     Event
}

type encoder struct {
	topics      [numStreams]string
	click       serde.Serde[schemas.ClickEvent]
	cart        serde.Serde[schemas.CartEvent]
	inventory   serde.Serde[schemas.InventoryEvent]
	payment     serde.Serde[schemas.PaymentEvent]
	fulfillment serde.Serde[schemas.FulfillmentEvent]
	product     serde.Serde[schemas.ProductEvent]
	tenant      serde.Serde[schemas.TenantEvent]
}

func newEncoder(cfg Config) (encoder, error) {
	t := cfg.Topics
	e := encoder{topics: [numStreams]string{t.Clicks, t.Carts, t.Inventory, t.Payments, t.Fulfillment, t.Products, t.Tenants}}
	var err error
	switch {
	case cfg.Serdes != nil:
		s := cfg.Serdes
		e.click, e.cart, e.inventory, e.payment, e.fulfillment = s.Click, s.Cart, s.Inventory, s.Payment, s.Fulfillment
		e.product, e.tenant = s.Product, s.Tenant
	case cfg.Format == FormatAvro:
		e.click, e.cart, e.inventory = schemas.Click.Avro(), schemas.Cart.Avro(), schemas.Inventory.Avro()
		e.payment, e.fulfillment = schemas.Payment.Avro(), schemas.Fulfillment.Avro()
	case cfg.Format == FormatJSON:
		e.click, e.cart, e.inventory = schemas.Click.JSON(), schemas.Cart.JSON(), schemas.Inventory.JSON()
		e.payment, e.fulfillment = schemas.Payment.JSON(), schemas.Fulfillment.JSON()
		e.product, e.tenant = schemas.ProductJSON(), schemas.TenantJSON()
	default:
		return e, fmt.Errorf("gen: unknown format %q", cfg.Format)
	}
	// Catalog serdes left unset are plain Avro with the embedded schemas.
	if e.product == nil {
		if e.product, err = schemas.ProductAvro(); err != nil {
			return e, err
		}
	}
	if e.tenant == nil {
		if e.tenant, err = schemas.TenantAvro(); err != nil {
			return e, err
		}
	}
	return e, nil
}

// Topic is the topic name of a stream under the generator's Config.
func (g *Generator) Topic(s Stream) string { return g.enc.topics[s] }

// Encode turns an event into a record: the stream's topic, the event's key
// as UTF-8, and the value in the configured format. The record owns its
// byte slices.
func (g *Generator) Encode(ev Event) (Record, error) {
	var err error
	val := make([]byte, 0, 160) // fits nearly every event; one allocation
	switch v := ev.Value.(type) {
	case schemas.ClickEvent:
		val, err = g.enc.click.Encode(val, v)
	case schemas.CartEvent:
		val, err = g.enc.cart.Encode(val, v)
	case schemas.InventoryEvent:
		val, err = g.enc.inventory.Encode(val, v)
	case schemas.PaymentEvent:
		val, err = g.enc.payment.Encode(val, v)
	case schemas.FulfillmentEvent:
		val, err = g.enc.fulfillment.Encode(val, v)
	case schemas.ProductEvent:
		val, err = g.enc.product.Encode(val, v)
	case schemas.TenantEvent:
		val, err = g.enc.tenant.Encode(val, v)
	default:
		err = fmt.Errorf("unknown event type %T", ev.Value)
	}
	if err != nil {
		return Record{}, fmt.Errorf("gen: encode event %d (%s): %w", ev.Seq, ev.Stream, err)
	}
	return Record{Topic: g.enc.topics[ev.Stream], Key: []byte(ev.Key()), Value: val, Timestamp: ev.Time(), Event: ev}, nil
}

// Records yields encoded records until the consumer stops or encoding
// fails (the error is yielded last).
func (g *Generator) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			r, err := g.NextRecord()
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// NextRecord generates and encodes the next event.
func (g *Generator) NextRecord() (Record, error) { return g.Encode(g.Next()) }
