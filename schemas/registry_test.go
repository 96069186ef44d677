package schemas

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/schemas/schemastest"
	"github.com/tidemark-streams/tidemark/serde"
)

func newFakeRegistry(t testing.TB) (*schemastest.Registry, *Registry) {
	f := schemastest.NewRegistry(t)
	return f, NewRegistry(f.Client(t))
}

func wire(id int, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

func TestRegistrySerdeWritesTheConfluentWireFormat(t *testing.T) {
	ctx := context.Background()
	_, reg := newFakeRegistry(t)
	s, err := Payment.Registry(ctx, reg, "payments-value")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Encode(nil, samplePayment())
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Payment.Avro().Encode(nil, samplePayment())
	if want := wire(s.SchemaID(), plain); string(b) != string(want) {
		t.Fatalf("wire bytes\n got %x\nwant %x", b, want)
	}
	got, err := s.DecodeContext(ctx, b)
	if err != nil || got != samplePayment() {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

func TestRegistrySerdeResolvesOldWritersAndCachesSchemas(t *testing.T) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(t)
	s, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	v1 := fake.Add("clicks-value", clickV1)
	rec := wire(v1, encodeWith(t, clickV1, clickV1Native()))
	for range 3 {
		got, err := s.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got.Device != "unknown" || got.UserID != "user-7" {
			t.Fatalf("v1 record read as %+v, want device filled from the default", got)
		}
	}
	if fake.Fetches() != 1 {
		t.Fatalf("registry fetched %d times for one schema id, want 1 (cached)", fake.Fetches())
	}
	// A second serde on the same Registry reuses the fetched schema.
	s2, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Decode(rec); err != nil || fake.Fetches() != 1 {
		t.Fatalf("second serde: err %v, fetches %d", err, fake.Fetches())
	}
}

func TestRegistryDecodeErrors(t *testing.T) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(t)
	clicks, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	carts, err := Cart.Registry(ctx, reg, "carts-value")
	if err != nil {
		t.Fatal(err)
	}
	good, _ := clicks.Encode(nil, sampleClick())
	cart, _ := carts.Encode(nil, sampleCart())
	badMagic := append([]byte{1}, good[1:]...)
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"wrong magic byte", badMagic, ErrWireFormat},
		{"shorter than the header", good[:3], ErrWireFormat},
		{"unknown schema id", wire(4242, good[5:]), ErrUnknownSchemaID},
		{"record of another event type", cart, ErrWrongEventType},
		{"malformed avro after a valid header", append(good[:5:5], 0xff, 0xff), ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clicks.DecodeContext(ctx, tc.in)
			if !errors.Is(err, tc.want) || !errors.Is(err, serde.ErrDecode) {
				t.Fatalf("err = %v, want %v and serde.ErrDecode", err, tc.want)
			}
		})
	}
	_, err = clicks.Decode(cart)
	var wrong *WrongEventTypeError
	if !errors.As(err, &wrong) || wrong.Got != Cart.Name() {
		t.Fatalf("wrong type error %v should name %s", err, Cart.Name())
	}

	fake.SetDown(true)
	_, err = clicks.Decode(wire(77, good[5:]))
	if !errors.Is(err, ErrRegistry) || errors.Is(err, serde.ErrDecode) {
		t.Fatalf("registry down: %v, want ErrRegistry and not a decode error (the record may be fine)", err)
	}
	if _, err := Click.Registry(ctx, reg, "clicks-value"); !errors.Is(err, ErrRegistry) {
		t.Fatalf("registering with the registry down: %v, want ErrRegistry", err)
	}
}

func TestRegistryDecodeHonoursContext(t *testing.T) {
	_, reg := newFakeRegistry(t)
	clicks, err := Click.Registry(context.Background(), reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := clicks.DecodeContext(ctx, wire(99, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("decode with cancelled context: %v, want context.Canceled", err)
	}
}

func TestRegistrySerdeIsSafeForConcurrentDecodes(t *testing.T) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(t)
	s, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	if ids := fake.Subjects("clicks-value"); len(ids) != 1 || ids[0] != s.SchemaID() {
		t.Fatalf("subject clicks-value holds %v, want the serde's id %d", ids, s.SchemaID())
	}
	v1 := wire(fake.Add("clicks-value", clickV1), encodeWith(t, clickV1, clickV1Native()))
	v2, _ := s.Encode(nil, sampleClick())
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			in := v1
			if i%2 == 0 {
				in = v2
			}
			_, err := s.Decode(in)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestWrongTypeRecordsFetchTheirSchemaOnce(t *testing.T) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(t)
	clicks, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	cartID := fake.Add("carts-value", Cart.Schema())
	rec := wire(cartID, must(Cart.Avro().Encode(nil, sampleCart())))
	for range 5 {
		if _, err := clicks.Decode(rec); !errors.Is(err, ErrWrongEventType) {
			t.Fatalf("err = %v, want ErrWrongEventType", err)
		}
	}
	if fake.Fetches() != 1 {
		t.Fatalf("fetched the cart schema %d times, want once", fake.Fetches())
	}
}

func TestRegistryEncodeOfAnInvalidEventLeavesDstAlone(t *testing.T) {
	_, reg := newFakeRegistry(t)
	s, err := Cart.Registry(context.Background(), reg, "carts-value")
	if err != nil {
		t.Fatal(err)
	}
	bad := sampleCart()
	bad.CartID = ""
	dst := []byte("prefix")
	out, err := s.Encode(dst, bad)
	if !errors.Is(err, ErrInvalidEvent) || string(out) != "prefix" {
		t.Fatalf("encode invalid: %q, %v; want dst unchanged and ErrInvalidEvent", out, err)
	}
}

// Only the registry's "schema not found" makes an id unknown: a plain 404
// (a wrong base URL, a proxy) is a registry failure, so the record it was
// asked for is not skipped or dead-lettered as undecodable.
func TestRegistryPlain404IsNotAnUnknownSchemaID(t *testing.T) {
	proxy := httptest.NewServer(http.NotFoundHandler())
	defer proxy.Close()
	cl, err := sr.NewClient(sr.URLs(proxy.URL))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewRegistry(cl).SchemaByID(context.Background(), 1)
	if !errors.Is(err, ErrRegistry) || errors.Is(err, serde.ErrDecode) || errors.Is(err, ErrUnknownSchemaID) {
		t.Fatalf("SchemaByID through a plain 404: %v, want ErrRegistry only", err)
	}
}
