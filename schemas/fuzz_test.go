package schemas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

// fuzzDecoder checks the contract a pipeline relies on for bytes from the
// outside world: Decode never panics, every failure wraps serde.ErrDecode
// (so the record can be dead-lettered), and whatever decodes re-encodes to
// bytes that decode to the same encoding again.
func fuzzDecoder[T Event](f *testing.F, s serde.Serde[T], seeds ...[]byte) {
	fuzzResolvingDecoder(f, s, s, seeds...)
}

// fuzzResolvingDecoder is fuzzDecoder for a serde whose Encode writes another
// schema than its Decode reads (AvroFrom): re-encoding goes through rt.
func fuzzResolvingDecoder[T Event](f *testing.F, s, rt serde.Serde[T], seeds ...[]byte) {
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := s.Decode(b)
		if err != nil {
			if !errors.Is(err, serde.ErrDecode) {
				t.Fatalf("decode error does not wrap serde.ErrDecode: %v", err)
			}
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v", err)
		}
		b1, err := rt.Encode(nil, v)
		if err != nil {
			t.Fatalf("re-encode decoded %+v: %v", v, err)
		}
		v2, err := rt.Decode(b1)
		if err != nil {
			t.Fatalf("decode re-encoded %x: %v", b1, err)
		}
		b2, err := rt.Encode(nil, v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable: %x then %x (%v)", b1, b2, err)
		}
	})
}

// fuzzAvro is fuzzDecoder for the plain Avro serde, which also checks that
// the direct decoder agrees with goavro on every input, and that the direct
// encoder writes what goavro writes for whatever decodes.
func fuzzAvro[T Event](f *testing.F, spec *Spec[T], seed T) {
	s := spec.Avro()
	checked := serde.Func[T]{
		EncodeFunc: func(dst []byte, v T) ([]byte, error) {
			got, err := s.Encode(dst, v)
			if err != nil {
				return got, err
			}
			want, err := spec.encodeGoavro(nil, v)
			if err != nil || !bytes.Equal(got[len(dst):], want) {
				return got, fmt.Errorf("direct encoder wrote %x, goavro %x (%v)", got[len(dst):], want, err)
			}
			return got, nil
		},
		DecodeFunc: func(b []byte) (T, error) {
			got, err := s.Decode(b)
			want, werr := spec.decodeGoavro(spec.self, b)
			if (err == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
				panic(fmt.Sprintf("direct decoder: %+v, %v; goavro: %+v, %v", got, err, want, werr))
			}
			return got, err
		},
	}
	fuzzDecoder[T](f, checked, must(s.Encode(nil, seed)))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzDecodeClickAvro(f *testing.F) {
	fuzzAvro(f, Click, sampleClick())
}

func FuzzDecodeCartAvro(f *testing.F) {
	fuzzAvro(f, Cart, sampleCart())
}

func FuzzDecodeInventoryAvro(f *testing.F) {
	fuzzAvro(f, Inventory, sampleInventory())
}

func FuzzDecodePaymentAvro(f *testing.F) {
	fuzzAvro(f, Payment, samplePayment())
}

func FuzzDecodeFulfillmentAvro(f *testing.F) {
	fuzzAvro(f, Fulfillment, sampleFulfillment())
}

func FuzzDecodeClickAvroFromV1(f *testing.F) {
	s, err := Click.AvroFrom(clickV1)
	if err != nil {
		f.Fatal(err)
	}
	fuzzResolvingDecoder(f, s, Click.Avro(), encodeWith(f, clickV1, clickV1Native()))
}

func FuzzDecodeClickJSON(f *testing.F) {
	fuzzDecoder(f, Click.JSON(), must(Click.JSON().Encode(nil, sampleClick())), []byte(`{"page":"home"}`))
}

func FuzzDecodeCartJSON(f *testing.F) {
	fuzzDecoder(f, Cart.JSON(), must(Cart.JSON().Encode(nil, sampleCart())))
}

func FuzzDecodeInventoryJSON(f *testing.F) {
	fuzzDecoder(f, Inventory.JSON(), must(Inventory.JSON().Encode(nil, sampleInventory())))
}

func FuzzDecodePaymentJSON(f *testing.F) {
	fuzzDecoder(f, Payment.JSON(), must(Payment.JSON().Encode(nil, samplePayment())))
}

func FuzzDecodeFulfillmentJSON(f *testing.F) {
	fuzzDecoder(f, Fulfillment.JSON(), must(Fulfillment.JSON().Encode(nil, sampleFulfillment())))
}

// FuzzDecodeRegistryWire fuzzes the wire-format path: header parsing, schema
// lookup by id (against the fake registry, so unknown ids are 404s) and
// resolution of an old writer.
func FuzzDecodeRegistryWire(f *testing.F) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(f)
	clicks, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		f.Fatal(err)
	}
	carts, err := Cart.Registry(ctx, reg, "carts-value")
	if err != nil {
		f.Fatal(err)
	}
	v1 := fake.Add("clicks-value", clickV1)
	fuzzDecoder(f, clicks,
		must(clicks.Encode(nil, sampleClick())),
		must(carts.Encode(nil, sampleCart())),
		wire(v1, encodeWith(f, clickV1, clickV1Native())),
		[]byte{1, 0, 0, 0, 1, 2},
	)
}
