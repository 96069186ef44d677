package schemas_test

import (
	"bytes"
	"testing"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/schemas"
)

func check[T schemas.Event](t *testing.T, s *schemas.Spec[T], v T) {
	t.Helper()
	got, err := s.Avro().Encode(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := schemas.EncodeGoavro(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%+v: encoder differs from goavro\n got %x\nwant %x", v, got, want)
	}
}

// TestEncoderMatchesGoavroOnGeneratedTraffic runs the fast encoders over the
// variety the generator produces.
func TestEncoderMatchesGoavroOnGeneratedTraffic(t *testing.T) {
	g, err := gen.New(gen.Config{Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range g.Take(30000) {
		switch v := ev.Value.(type) {
		case schemas.ClickEvent:
			check(t, schemas.Click, v)
		case schemas.CartEvent:
			check(t, schemas.Cart, v)
		case schemas.InventoryEvent:
			check(t, schemas.Inventory, v)
		case schemas.PaymentEvent:
			check(t, schemas.Payment, v)
		case schemas.FulfillmentEvent:
			check(t, schemas.Fulfillment, v)
		}
	}
}
