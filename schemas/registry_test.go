package schemas

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
)

// fakeRegistry implements the two Schema Registry endpoints the serdes call:
// POST /subjects/{subject}/versions and GET /schemas/ids/{id}.
type fakeRegistry struct {
	mu      sync.Mutex
	byID    map[int]string
	fetches int
	down    bool // answer 503 to everything
}

func newFakeRegistry(t testing.TB) (*fakeRegistry, *Registry) {
	f := &fakeRegistry{byID: map[int]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subjects/{subject}/versions", f.register)
	mux.HandleFunc("GET /schemas/ids/{id}", f.schemaByID)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cl, err := sr.NewClient(sr.URLs(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return f, NewRegistry(cl)
}

func (f *fakeRegistry) unavailable(w http.ResponseWriter) bool {
	if f.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error_code":50003,"message":"registry is down"}`)
	}
	return f.down
}

func (f *fakeRegistry) add(schema string) int {
	for id, s := range f.byID {
		if s == schema {
			return id
		}
	}
	id := len(f.byID) + 1
	f.byID[id] = schema
	return id
}

func (f *fakeRegistry) register(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unavailable(w) {
		return
	}
	var body sr.Schema
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, `{"id":%d}`, f.add(body.Schema))
}

func (f *fakeRegistry) schemaByID(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unavailable(w) {
		return
	}
	f.fetches++
	id, _ := strconv.Atoi(r.PathValue("id"))
	s, ok := f.byID[id]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error_code":40403,"message":"Schema %d not found"}`, id)
		return
	}
	json.NewEncoder(w).Encode(sr.Schema{Schema: s})
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
	fake.mu.Lock()
	v1 := fake.add(clickV1)
	fake.mu.Unlock()
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
	if fake.fetches != 1 {
		t.Fatalf("registry fetched %d times for one schema id, want 1 (cached)", fake.fetches)
	}
	// A second serde on the same Registry reuses the fetched schema.
	s2, err := Click.Registry(ctx, reg, "clicks-value")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Decode(rec); err != nil || fake.fetches != 1 {
		t.Fatalf("second serde: err %v, fetches %d", err, fake.fetches)
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

	fake.mu.Lock()
	fake.down = true
	fake.mu.Unlock()
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
