package schemas

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"

	"github.com/tidemark-streams/tidemark/serde"
)

var t0 = time.UnixMilli(1767225600123).UTC()

func sampleClick() ClickEvent {
	return ClickEvent{EventID: "e1", Tenant: "seller-01", UserID: "user-7", SessionID: "s-1", SKU: "seller-01-sku-3", Page: PageProduct, EventTime: t0, Device: "mobile"}
}

func sampleCart() CartEvent {
	return CartEvent{EventID: "e2", Tenant: "seller-01", CartID: "cart-1", UserID: "user-7", SKU: "seller-01-sku-3", Action: CartAdd, Quantity: 2, UnitPriceCents: 1999, Currency: "EUR", EventTime: t0}
}

func sampleInventory() InventoryEvent {
	return InventoryEvent{EventID: "e3", Tenant: "seller-01", SKU: "seller-01-sku-3", WarehouseID: "wh-1", Kind: InventoryReserve, Delta: -2, CartID: "cart-1", EventTime: t0}
}

func samplePayment() PaymentEvent {
	return PaymentEvent{EventID: "e4", Tenant: "seller-01", PaymentID: "pay-1", OrderID: "order-1", CartID: "cart-1", UserID: "user-7", Status: PaymentFailed, AmountCents: 3998, Currency: "EUR", Method: "card", FailureReason: "insufficient_funds", EventTime: t0}
}

func sampleFulfillment() FulfillmentEvent {
	return FulfillmentEvent{EventID: "e5", Tenant: "seller-01", ShipmentID: "ship-1", OrderID: "order-1", UserID: "user-7", WarehouseID: "wh-1", Status: FulfillmentShipped, Carrier: "dhl", EventTime: t0}
}

func roundTrip[T Event](t *testing.T, name string, s serde.Serde[T], v T) {
	t.Helper()
	b, err := s.Encode(nil, v)
	if err != nil {
		t.Fatalf("%s: encode: %v", name, err)
	}
	got, err := s.Decode(b)
	if err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("%s: round trip changed the event\n got %+v\nwant %+v", name, got, v)
	}
}

func TestEveryEventRoundTripsThroughAvroAndJSON(t *testing.T) {
	roundTrip(t, "click avro", Click.Avro(), sampleClick())
	roundTrip(t, "click json", Click.JSON(), sampleClick())
	roundTrip(t, "cart avro", Cart.Avro(), sampleCart())
	roundTrip(t, "cart json", Cart.JSON(), sampleCart())
	roundTrip(t, "inventory avro", Inventory.Avro(), sampleInventory())
	roundTrip(t, "inventory json", Inventory.JSON(), sampleInventory())
	roundTrip(t, "payment avro", Payment.Avro(), samplePayment())
	roundTrip(t, "payment json", Payment.JSON(), samplePayment())
	roundTrip(t, "fulfillment avro", Fulfillment.Avro(), sampleFulfillment())
	roundTrip(t, "fulfillment json", Fulfillment.JSON(), sampleFulfillment())

	// Optional fields left empty come back empty (written as Avro null).
	c := sampleClick()
	c.SKU, c.Page = "", PageHome
	roundTrip(t, "click without sku", Click.Avro(), c)
}

func TestAvroEventTimeKeepsMillisecondsOnly(t *testing.T) {
	c := sampleClick()
	c.EventTime = t0.Add(456 * time.Microsecond)
	b, err := Click.Avro().Encode(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Click.Avro().Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.EventTime.Equal(t0) || got.EventTime.Location() != time.UTC {
		t.Fatalf("event time %v, want %v in UTC", got.EventTime, t0)
	}
}

func TestEncodeAppendsToDst(t *testing.T) {
	prefix := []byte("keep")
	b, err := Cart.Avro().Encode(prefix, sampleCart())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "keep") {
		t.Fatalf("encode dropped dst: %q", b)
	}
	got, err := Cart.Avro().Decode(b[4:])
	if err != nil || got != sampleCart() {
		t.Fatalf("decode after prefix: %+v, %v", got, err)
	}
}

func TestEncodeRejectsInvalidEvents(t *testing.T) {
	cases := []struct {
		name string
		enc  func() error
	}{
		{"cart with zero quantity", func() error {
			c := sampleCart()
			c.Quantity = 0
			_, err := Cart.Avro().Encode(nil, c)
			return err
		}},
		{"click with unknown page", func() error {
			c := sampleClick()
			c.Page = "landing"
			_, err := Click.JSON().Encode(nil, c)
			return err
		}},
		{"reserve that adds stock", func() error {
			e := sampleInventory()
			e.Delta = 2
			_, err := Inventory.Avro().Encode(nil, e)
			return err
		}},
		{"payment without order id", func() error {
			p := samplePayment()
			p.OrderID = ""
			_, err := Payment.Avro().Encode(nil, p)
			return err
		}},
		{"fulfillment without event time", func() error {
			f := sampleFulfillment()
			f.EventTime = time.Time{}
			_, err := Fulfillment.Avro().Encode(nil, f)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.enc()
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if errors.Is(err, serde.ErrDecode) {
				t.Fatalf("an encode error must not claim to be a decode error: %v", err)
			}
		})
	}
}

func TestDecodeFailuresAreTyped(t *testing.T) {
	good, err := Payment.Avro().Encode(nil, samplePayment())
	if err != nil {
		t.Fatal(err)
	}
	click, err := Click.Avro().Encode(nil, sampleClick())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty input", nil, ErrMalformed},
		{"truncated record", good[:len(good)/2], ErrMalformed},
		{"trailing bytes", append(append([]byte{}, good...), 0x02), ErrMalformed},
		{"string length beyond input", []byte{0x7e, 'a'}, ErrMalformed},
		{"a click read as a payment", click, ErrDecode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Payment.Avro().Decode(tc.in)
			if !errors.Is(err, serde.ErrDecode) {
				t.Fatalf("err = %v, want serde.ErrDecode", err)
			}
			if tc.want != ErrDecode && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Cart.JSON().Decode([]byte(`{"event_id":`)); !errors.Is(err, ErrMalformed) || !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("truncated json: %v", err)
	}
	fj, _ := Fulfillment.JSON().Encode(nil, sampleFulfillment())
	if _, err := Payment.JSON().Decode(fj); !errors.Is(err, ErrInvalidEvent) || !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("fulfillment json read as payment: %v, want ErrInvalidEvent", err)
	}
}

// ErrDecode is a local alias so the table above can say "any decode error".
var ErrDecode = serde.ErrDecode

// clickV1 is ClickEvent as first published: no device field.
const clickV1 = `{
  "type": "record", "name": "ClickEvent", "namespace": "tidemark.marketplace",
  "fields": [
    {"name": "event_id", "type": "string"},
    {"name": "tenant", "type": "string"},
    {"name": "user_id", "type": "string"},
    {"name": "session_id", "type": "string"},
    {"name": "sku", "type": ["null", "string"], "default": null},
    {"name": "page", "type": {"type": "enum", "name": "PageType", "symbols": ["home", "search", "category", "product", "cart", "checkout"]}},
    {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}}
  ]}`

func encodeWith(t testing.TB, schema string, native map[string]any) []byte {
	t.Helper()
	codec, err := goavro.NewCodec(schema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := codec.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clickV1Native() map[string]any {
	return map[string]any{
		"event_id": "e1", "tenant": "seller-01", "user_id": "user-7", "session_id": "s-1",
		"sku": goavro.Union("string", "seller-01-sku-3"), "page": "product", "event_time": t0.UnixMilli(),
	}
}

func TestV1ClickIsReadWithTheV2DefaultForDevice(t *testing.T) {
	b := encodeWith(t, clickV1, clickV1Native())
	if _, err := Click.Avro().Decode(b); err == nil {
		t.Fatal("reading v1 bytes as v2 without the writer schema should fail, it succeeded")
	}
	s, err := Click.AvroFrom(clickV1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleClick()
	want.Device = "unknown"
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestResolutionDropsUnknownFieldsAndPromotesInts(t *testing.T) {
	// A newer writer: an extra field, and unit_price_cents as int.
	writer := strings.Replace(Cart.Schema(), `{"name": "unit_price_cents", "type": "long"}`,
		`{"name": "unit_price_cents", "type": "int"}, {"name": "gift_wrap", "type": "boolean"}`, 1)
	if writer == Cart.Schema() {
		t.Fatal("test schema edit did not apply")
	}
	c := sampleCart()
	native := cartToNative(c)
	native["unit_price_cents"] = int32(c.UnitPriceCents)
	native["gift_wrap"] = true
	b := encodeWith(t, writer, native)
	s, err := Cart.AvroFrom(writer)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("got %+v\nwant %+v", got, c)
	}
}

func TestResolutionFailures(t *testing.T) {
	noTenant := strings.Replace(clickV1, `{"name": "tenant", "type": "string"},`, "", 1)
	if _, err := Click.AvroFrom(noTenant); !errors.Is(err, ErrIncompatibleSchema) {
		t.Fatalf("writer without a required reader field: %v, want ErrIncompatibleSchema", err)
	}
	_, err := Click.AvroFrom(Cart.Schema())
	var wrong *WrongEventTypeError
	if !errors.As(err, &wrong) || !errors.Is(err, ErrWrongEventType) {
		t.Fatalf("cart writer for click reader: %v, want *WrongEventTypeError", err)
	}
	if wrong.Want != "tidemark.marketplace.ClickEvent" || wrong.Got != "tidemark.marketplace.CartEvent" {
		t.Fatalf("wrong type names: %+v", wrong)
	}
	if _, err := Click.AvroFrom(`"string"`); !errors.Is(err, ErrWrongEventType) {
		t.Fatalf("primitive writer schema: %v, want ErrWrongEventType", err)
	}
}

func TestEmbeddedSchemasNameTheirTypes(t *testing.T) {
	names := map[string]string{
		Click.Name(): Click.Schema(), Cart.Name(): Cart.Schema(), Inventory.Name(): Inventory.Schema(),
		Payment.Name(): Payment.Schema(), Fulfillment.Name(): Fulfillment.Schema(),
	}
	for _, n := range []string{"ClickEvent", "CartEvent", "InventoryEvent", "PaymentEvent", "FulfillmentEvent"} {
		text, ok := names["tidemark.marketplace."+n]
		if !ok {
			t.Fatalf("no spec named %s", n)
		}
		if !strings.Contains(text, `"tenant"`) || !strings.Contains(text, `"timestamp-millis"`) {
			t.Fatalf("%s lacks a tenant or a timestamp-millis event time", n)
		}
	}
}
