package serde_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
)

func newFake(t testing.TB) *srtest.Registry { return srtest.NewRegistry(t) }

func wire(id int, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

// Version 1 and 2 of a user's schema: v2 adds a field with a default,
// drops one, makes a field optional, widens an int to a long and adds an
// enum symbol (with a default symbol for readers that lack it).
const userV1 = `{"type":"record","name":"User","namespace":"acme.v1","fields":[
	{"name":"id","type":"string"},
	{"name":"age","type":"int"},
	{"name":"nick","type":"string"},
	{"name":"legacy","type":"string"},
	{"name":"tier","type":{"type":"enum","name":"Tier","symbols":["FREE","PRO"],"default":"FREE"}}]}`

const userV2 = `{"type":"record","name":"User","namespace":"acme.v2","fields":[
	{"name":"id","type":"string"},
	{"name":"age","type":"long"},
	{"name":"nick","type":["null","string"],"default":null},
	{"name":"tier","type":{"type":"enum","name":"Tier","symbols":["FREE","PRO","TEAM"],"default":"FREE"}},
	{"name":"country","type":"string","default":"NL"},
	{"name":"scores","type":{"type":"array","items":"double"},"default":[1.5]},
	{"name":"since","type":{"type":"long","logicalType":"timestamp-millis"},"default":1000},
	{"name":"slot","type":{"type":"int","logicalType":"time-millis"},"default":90000}]}`

type Tier string

type userV1T struct {
	ID     string `avro:"id"`
	Age    int32  `avro:"age"`
	Nick   string `avro:"nick"`
	Legacy string `avro:"legacy"`
	Tier   Tier   `avro:"tier"`
}

type userV2T struct {
	ID      string        `avro:"id"`
	Age     int64         `avro:"age"`
	Nick    *string       `avro:"nick"`
	Tier    Tier          `avro:"tier"`
	Country string        `avro:"country"`
	Scores  []float64     `avro:"scores"`
	Since   time.Time     `avro:"since"`
	Slot    time.Duration `avro:"slot"`
}

func TestAvroSchemaEvolution(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	w1 := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	w2 := mustAvro[userV2T](t, userV2, serde.WithRegistry(cl, "users-value"))

	t.Run("old writer, new reader: defaults fill added fields", func(t *testing.T) {
		b, err := w1.Encode(nil, userV1T{"u1", 41, "ann", "x", "PRO"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := w2.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != "u1" || got.Age != 41 || got.Nick == nil || *got.Nick != "ann" || got.Tier != "PRO" ||
			got.Country != "NL" || len(got.Scores) != 1 || got.Scores[0] != 1.5 ||
			!got.Since.Equal(time.UnixMilli(1000)) || got.Slot != 90*time.Second {
			t.Fatalf("v1 record read as v2: %+v (nick %v)", got, got.Nick)
		}
	})
	t.Run("new writer, old reader: removed fields are skipped", func(t *testing.T) {
		// v1's reader would skip country and scores, but v2 widened
		// age to a long, which an int cannot hold, and lacks legacy,
		// which v1 has no default for: this direction is incompatible
		// and must say so.
		b, err := w2.Encode(nil, userV2T{ID: "u2", Age: 7, Tier: "TEAM", Country: "BE"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w1.Decode(b)
		if !errors.Is(err, serde.ErrDecode) || !errors.Is(err, serde.ErrIncompatibleSchema) || !strings.Contains(err.Error(), "age") {
			t.Fatalf("v2 record read as v1: %v, want ErrIncompatibleSchema naming age", err)
		}
	})
	t.Run("new writer, old reader with defaults", func(t *testing.T) {
		type userV1Lenient struct {
			ID   string `avro:"id"`
			Age  int64  `avro:"age"`
			Tier Tier   `avro:"tier"`
		}
		const v1Lenient = `{"type":"record","name":"User","fields":[
			{"name":"id","type":"string"},
			{"name":"age","type":"long"},
			{"name":"legacy","type":"string","default":""},
			{"name":"tier","type":{"type":"enum","name":"Tier","symbols":["FREE","PRO"],"default":"FREE"}}]}`
		r := mustAvro[userV1Lenient](t, v1Lenient, serde.WithRegistry(cl, "users-value"))
		b, _ := w2.Encode(nil, userV2T{ID: "u3", Age: 9, Tier: "TEAM", Country: "BE", Scores: []float64{2}})
		got, err := r.Decode(b)
		if err != nil || got != (userV1Lenient{"u3", 9, "FREE"}) {
			t.Fatalf("v2 record read by a v1 reader: %+v, %v; want the unknown symbol TEAM read as the default FREE", got, err)
		}
	})
	t.Run("optional writer to required reader", func(t *testing.T) {
		// nick: ["null","string"] written, "string" read: a string
		// branch decodes, a null fails that record only.
		r := mustAvro[struct {
			Nick string `avro:"nick"`
		}](t, `{"type":"record","name":"User","fields":[{"name":"nick","type":"string"}]}`, serde.WithRegistry(cl, "users-value"))
		b, _ := w2.Encode(nil, userV2T{ID: "u4", Nick: ptr("bo"), Tier: "FREE"})
		if got, err := r.Decode(b); err != nil || got.Nick != "bo" {
			t.Fatalf("string branch: %+v, %v", got, err)
		}
		b, _ = w2.Encode(nil, userV2T{ID: "u5", Tier: "FREE"})
		if _, err := r.Decode(b); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("null branch into a required string: %v, want ErrDecode", err)
		}
	})
	t.Run("another record type", func(t *testing.T) {
		other := mustAvro[lineItem](t, `{"type":"record","name":"Line","fields":[
			{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}`, serde.WithRegistry(cl, "lines-value"))
		b, _ := other.Encode(nil, lineItem{"mug", 1, 2})
		if _, err := w2.Decode(b); !errors.Is(err, serde.ErrIncompatibleSchema) || !strings.Contains(err.Error(), "Line") {
			t.Fatalf("a Line read as a User: %v", err)
		}
	})
}

func TestAvroRegistryCachesIDs(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	w := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	r := mustAvro[userV2T](t, userV2, serde.WithRegistry(cl, "users-value"))
	for i := range 5 {
		b, err := w.Encode(nil, userV1T{ID: fmt.Sprint(i), Tier: "FREE"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Decode(b); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Decode(b); err != nil { // its own id: no fetch
			t.Fatal(err)
		}
	}
	if got := fake.Calls(srtest.Register); got != 1 {
		t.Errorf("writer registered %d times, want once", got)
	}
	if got := fake.Fetches(); got != 1 {
		t.Errorf("reader fetched the writer schema %d times, want once", got)
	}

	// Unknown ids are not cached: once registered, they decode.
	v1Payload, _ := mustAvro[userV1T](t, userV1).Encode(nil, userV1T{ID: "late", Tier: "PRO"})
	lateSchema := strings.Replace(userV1, `"acme.v1"`, `"acme.late"`, 1)
	nextID := fake.Subjects("users-value")[0] + 1
	rec := wire(nextID, v1Payload)
	if _, err := r.Decode(rec); !errors.Is(err, serde.ErrUnknownSchemaID) || !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("unknown id: %v, want ErrUnknownSchemaID and ErrDecode", err)
	}
	if id := fake.Add("users-value", lateSchema); id != nextID {
		t.Fatalf("fake assigned id %d, want %d", id, nextID)
	}
	if got, err := r.Decode(rec); err != nil || got.ID != "late" {
		t.Fatalf("after registration: %+v, %v", got, err)
	}

	// A decoder that never encoded fetches even its own schema, once.
	fresh := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	before := fake.Fetches()
	b, _ := w.Encode(nil, userV1T{ID: "x", Tier: "FREE"})
	for range 3 {
		if _, err := fresh.Decode(b); err != nil {
			t.Fatal(err)
		}
	}
	if got := fake.Fetches() - before; got != 1 {
		t.Errorf("fresh decoder fetched %d times, want once", got)
	}
}

func TestAvroWithoutAutoRegisterLooksUp(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"), serde.WithAutoRegister(false))
	_, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if !errors.Is(err, serde.ErrEncode) || !errors.Is(err, serde.ErrSchemaNotRegistered) || !errors.Is(err, serde.ErrRegistry) ||
		!strings.Contains(err.Error(), "users-value") {
		t.Fatalf("unregistered subject: %v, want ErrEncode, ErrRegistry and ErrSchemaNotRegistered naming the subject", err)
	}
	fake.Add("users-value", userV2)
	if _, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"}); !errors.Is(err, serde.ErrSchemaNotRegistered) {
		t.Fatalf("subject without this schema: %v, want ErrSchemaNotRegistered", err)
	}
	id := fake.Add("users-value", userV1)
	b, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if err != nil || int(binary.BigEndian.Uint32(b[1:5])) != id {
		t.Fatalf("after registration: %x, %v; want id %d", b, err, id)
	}
	if fake.Calls(srtest.Register) != 0 {
		t.Fatalf("WithAutoRegister(false) registered a schema")
	}
	if _, err := s.Encode(nil, userV1T{ID: "b", Tier: "FREE"}); err != nil || fake.Calls(srtest.Lookup) != 3 {
		t.Fatalf("the looked-up id is cached: err %v, lookups %d, want 3", err, fake.Calls(srtest.Lookup))
	}
}

func TestAvroRegistryErrors(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	good, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, serde.ErrWireFormat},
		{"shorter than the header", good[:3], serde.ErrWireFormat},
		{"wrong magic byte", append([]byte{1}, good[1:]...), serde.ErrWireFormat},
		{"unknown schema id", wire(4242, good[5:]), serde.ErrUnknownSchemaID},
		{"payload not matching the schema", append(good[:5:5], 0xff, 0xff, 0xff), serde.ErrDecode},
		{"trailing bytes", append(append([]byte{}, good...), 1), serde.ErrDecode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Decode(tc.in)
			if !errors.Is(err, tc.want) || !errors.Is(err, serde.ErrDecode) {
				t.Fatalf("err = %v, want %v and serde.ErrDecode", err, tc.want)
			}
		})
	}

	fake.SetDown(true)
	_, err = s.Decode(wire(77, good[5:]))
	if !errors.Is(err, serde.ErrRegistry) || errors.Is(err, serde.ErrDecode) {
		t.Fatalf("registry down, decode: %v, want ErrRegistry and not ErrDecode (the record may be fine)", err)
	}
	fresh := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "other-value"))
	if _, err := fresh.Encode(nil, userV1T{ID: "a"}); !errors.Is(err, serde.ErrRegistry) || !errors.Is(err, serde.ErrEncode) {
		t.Fatalf("registry down, encode: %v, want ErrRegistry and ErrEncode", err)
	}
	if _, err := s.Decode(good); err != nil {
		t.Fatalf("a cached id decodes while the registry is down: %v", err)
	}
	fake.SetDown(false)
	if _, err := fresh.Encode(nil, userV1T{ID: "a", Tier: "FREE"}); err != nil {
		t.Fatalf("encode after the registry is back: %v", err)
	}

	unreachable := srtest.NewRegistry(t)
	ucl := unreachable.Client(t)
	unreachable.Close()
	u := mustAvro[userV1T](t, userV1, serde.WithRegistry(ucl, "users-value"))
	if _, err := u.Encode(nil, userV1T{ID: "a"}); !errors.Is(err, serde.ErrRegistry) {
		t.Fatalf("unreachable registry, encode: %v, want ErrRegistry", err)
	}
	if _, err := u.Decode(good); !errors.Is(err, serde.ErrRegistry) {
		t.Fatalf("unreachable registry, decode: %v, want ErrRegistry", err)
	}
}

func TestAvroRegistryCallsAreBounded(t *testing.T) {
	fake := newFake(t)
	fake.SetDelay(time.Minute)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(fake.Client(t), "users-value"), serde.WithRegistryTimeout(100*time.Millisecond))
	start := time.Now()
	_, errEnc := s.Encode(nil, userV1T{ID: "a"})
	_, errDec := s.Decode(wire(1, nil))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("two registry calls took %v with a 100ms timeout", took)
	}
	for name, err := range map[string]error{"encode": errEnc, "decode": errDec} {
		if !errors.Is(err, serde.ErrRegistry) {
			t.Errorf("%s against a hanging registry: %v, want ErrRegistry", name, err)
		}
	}
}

func TestAvroConcurrentUse(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	w1 := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	r := mustAvro[userV2T](t, userV2, serde.WithRegistry(cl, "users-value"))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := fmt.Sprintf("%d-%d", g, i)
				var b []byte
				var err error
				if (g+i)%2 == 0 {
					b, err = w1.Encode(nil, userV1T{ID: id, Age: int32(i), Tier: "PRO"})
				} else {
					b, err = r.Encode(nil, userV2T{ID: id, Age: int64(i), Tier: "PRO", Scores: []float64{}})
				}
				if err != nil {
					errs <- err
					return
				}
				got, err := r.Decode(b)
				if err != nil || got.ID != id || got.Age != int64(i) {
					errs <- fmt.Errorf("decode %s: %+v, %v", id, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := fake.Calls(srtest.Register); got != 2 {
		t.Errorf("%d registrations from two serdes, want 2", got)
	}
	if got := fake.Fetches(); got != 1 {
		t.Errorf("%d fetches of one foreign writer schema, want 1", got)
	}
}

func FuzzAvroDecode(f *testing.F) {
	fake := newFake(f)
	cl := fake.Client(f)
	reg := mustAvro[order](f, orderSchema, serde.WithRegistry(cl, "orders-value"))
	plain := mustAvro[order](f, orderSchema)
	good, err := reg.Encode(nil, sampleOrder())
	if err != nil {
		f.Fatal(err)
	}
	v1 := mustAvro[userV1T](f, userV1, serde.WithRegistry(cl, "users-value"))
	other, _ := v1.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	f.Add(good)
	f.Add(good[5:])
	f.Add(other)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range []serde.Serde[order]{reg, plain} {
			v, err := s.Decode(b)
			if err != nil {
				if !errors.Is(err, serde.ErrDecode) {
					t.Fatalf("decode %x: %v does not wrap ErrDecode", b, err)
				}
				continue
			}
			// Whatever decodes re-encodes and decodes to the same value.
			again, err := s.Encode(nil, v)
			if err != nil {
				t.Fatalf("re-encode %+v: %v", v, err)
			}
			if _, err := s.Decode(again); err != nil {
				t.Fatalf("decode of re-encoded %x: %v", again, err)
			}
		}
	})
}

// A 404 that is not the registry's "schema not found" (a wrong base URL, a
// proxy in front of a registry that is being redeployed) says nothing about
// the record: decoding must not call it undecodable, which would skip or
// dead-letter every good record.
func TestAvroRegistry404WithoutSchemaNotFoundIsARegistryError(t *testing.T) {
	fake := newFake(t)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(fake.Client(t), "users-value"))
	good, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(http.NotFoundHandler())
	defer proxy.Close()
	cl, err := sr.NewClient(sr.URLs(proxy.URL))
	if err != nil {
		t.Fatal(err)
	}
	r := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
	if _, err := r.Decode(good); !errors.Is(err, serde.ErrRegistry) || errors.Is(err, serde.ErrDecode) {
		t.Fatalf("decode through a plain 404: %v, want ErrRegistry and not ErrDecode", err)
	}
}

// Which registry failures a caller should wait out and retry, and which
// are refusals that no retry fixes.
func TestRegistryUnavailable(t *testing.T) {
	fake := newFake(t)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(fake.Client(t), "users-value"))
	good, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		status      int
		code        int
		unavailable bool
	}{
		{"server error", http.StatusServiceUnavailable, 50003, true},
		{"request timeout", http.StatusRequestTimeout, 0, true},
		{"rate limited", http.StatusTooManyRequests, 42901, true},
		{"a proxy's 404", http.StatusNotFound, 0, true},
		{"unauthorized", http.StatusUnauthorized, 40101, false},
		{"forbidden", http.StatusForbidden, 40301, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `{"error_code":%d,"message":"no"}`, tc.code)
			}))
			defer srv.Close()
			cl, err := sr.NewClient(sr.URLs(srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			r := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
			_, err = r.Decode(good)
			if got := serde.RegistryUnavailable(err); got != tc.unavailable {
				t.Fatalf("decode answered %d: %v; RegistryUnavailable = %v, want %v", tc.status, err, got, tc.unavailable)
			}
		})
	}
	_, err = s.Decode(wire(4242, good[5:]))
	if serde.RegistryUnavailable(err) {
		t.Fatalf("an unknown schema id (%v) is not an outage", err)
	}
	unreachable := srtest.NewRegistry(t)
	ucl := unreachable.Client(t)
	unreachable.Close()
	u := mustAvro[userV1T](t, userV1, serde.WithRegistry(ucl, "users-value"))
	if _, err := u.Decode(good); !serde.RegistryUnavailable(err) {
		t.Fatalf("unreachable registry: %v, want RegistryUnavailable", err)
	}
}
