package pipelines_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/schemas/schemastest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func inventoryEvent(sku string, delta int32) schemas.InventoryEvent {
	return schemas.InventoryEvent{EventID: "ev-" + sku, Tenant: "seller-001", SKU: sku, WarehouseID: "wh-1",
		Kind: schemas.InventoryRestock, Delta: delta, EventTime: time.UnixMilli(1_000)}
}

// newDriver runs one pipeline in the test driver.
func newDriver(t *testing.T, pipeline string, cfg pipelines.Config) *tidemarktest.Driver {
	t.Helper()
	topo, err := pipelines.Build("mkt", []string{pipeline}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestMalformedAvroFailsNamingTheRecordByDefault(t *testing.T) {
	d := newDriver(t, pipelines.Inventory, pipelines.Config{})
	in := tidemarktest.Input(d, gen.DefaultTopics.Inventory, serde.String(), serde.Bytes())
	err := in.Pipe("sku-1", []byte{0xff, 0xfe, 0x01}, 1_000)
	if !errors.Is(err, serde.ErrDecode) || !errors.Is(err, schemas.ErrMalformed) {
		t.Fatalf("error %v, want serde.ErrDecode and schemas.ErrMalformed", err)
	}
	if !strings.Contains(err.Error(), gen.DefaultTopics.Inventory) {
		t.Errorf("error %q does not name the topic", err)
	}
}

func TestSkipUndecodableDropsAndCountsMalformedRecords(t *testing.T) {
	d := newDriver(t, pipelines.Inventory, pipelines.Config{SkipUndecodable: true})
	raw := tidemarktest.Input(d, gen.DefaultTopics.Inventory, serde.String(), serde.Bytes())
	good := tidemarktest.Input(d, gen.DefaultTopics.Inventory, serde.String(), schemas.Inventory.Avro())
	if err := good.Pipe("sku-1", inventoryEvent("sku-1", 5), 1_000); err != nil {
		t.Fatal(err)
	}
	if err := raw.Pipe("sku-1", []byte("not avro"), 1_001); err != nil {
		t.Fatalf("undecodable record with SkipUndecodable: %v", err)
	}
	if n := d.Metrics().Dropped[topology.DropUndecodable]; n != 1 {
		t.Errorf("dropped undecodable = %d, want 1", n)
	}
	a, found, err := tidemarktest.Get(d, pipelines.StoreAvailability, "sku-1", serde.String(), pipelines.AvailabilitySerde())
	if err != nil || !found || a.Available != 5 {
		t.Errorf("availability of sku-1 = %+v (found %v, err %v), want 5 from the good record alone", a, found, err)
	}
}

// With registry serdes (Confluent wire format), a record's writer schema
// id says what it is: an id the registry does not know, and an event of
// another type on the topic, are decoding errors that say so.
func TestRegistryInputsRejectUnknownSchemaIDsAndWrongEventTypes(t *testing.T) {
	fake := schemastest.NewRegistry(t)
	reg := schemas.NewRegistry(fake.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := gen.RegistrySerdes(ctx, reg, gen.DefaultTopics)
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, pipelines.Inventory, pipelines.Config{Serdes: s})
	raw := tidemarktest.Input(d, gen.DefaultTopics.Inventory, serde.String(), serde.Bytes())

	good, err := s.Inventory.Encode(nil, inventoryEvent("sku-1", 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Pipe("sku-1", good, 1_000); err != nil {
		t.Fatalf("a well-formed registry record: %v", err)
	}

	unknown := append([]byte{0, 0, 0, 0x7f, 0xff}, good[5:]...) // schema id 32767
	err = raw.Pipe("sku-1", unknown, 1_001)
	if !errors.Is(err, schemas.ErrUnknownSchemaID) || !errors.Is(err, serde.ErrDecode) {
		t.Errorf("unknown schema id: error %v, want schemas.ErrUnknownSchemaID", err)
	}

	pay, err := s.Payment.Encode(nil, schemas.PaymentEvent{EventID: "ev-p", Tenant: "seller-001", PaymentID: "pay-1", OrderID: "order-1",
		CartID: "cart-1", UserID: "user-1", Status: schemas.PaymentAuthorized, AmountCents: 100, Currency: "USD", Method: "card",
		EventTime: time.UnixMilli(1_002)})
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Pipe("order-1", pay, 1_002)
	if !errors.Is(err, serde.ErrDecode) || !errors.Is(err, schemas.ErrWrongEventType) {
		t.Errorf("payment on the inventory topic: error %v, want schemas.ErrWrongEventType", err)
	}
}

func TestPipelinesConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  pipelines.Config
		want string
	}{
		{"advance longer than the window", pipelines.Config{FraudAdvance: 2 * time.Minute}, "FraudAdvance"},
		{"negative threshold", pipelines.Config{FraudThreshold: -1}, "FraudThreshold"},
		{"negative grace", pipelines.Config{Grace: -time.Second}, "Grace"},
		{"sub-second ship deadline", pipelines.Config{ShipWithin: time.Millisecond}, "ShipWithin"},
		{"one topic for two streams", pipelines.Config{Outputs: pipelines.Outputs{FraudAlerts: "payments"}}, "Outputs.FraudAlerts"},
		{"partial serdes", pipelines.Config{Serdes: &gen.Serdes{Cart: schemas.Cart.Avro()}}, "Serdes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipelines.Build("mkt", nil, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	if _, err := pipelines.ParseNames("inventory,shipping"); err == nil || !strings.Contains(err.Error(), `"shipping"`) {
		t.Errorf("ParseNames with an unknown pipeline: %v", err)
	}
}
