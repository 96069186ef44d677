package serde_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

type Status string

type lineItem struct {
	SKU      string  `avro:"sku"`
	Quantity int32   `avro:"qty"`
	Price    float64 `json:"price"`
}

type address struct {
	Street string
	City   string
}

type order struct {
	ID        string            `avro:"id"`
	Placed    time.Time         `avro:"placed_at"`
	Status    Status            `avro:"status"`
	Lines     []lineItem        `avro:"lines"`
	Tags      map[string]string `avro:"tags"`
	Ship      *address          `avro:"ship_to"`
	Note      *string           `avro:"note"`
	Total     int64             `avro:"total_cents"`
	Ratio     float32           `avro:"ratio"`
	Gift      bool              `avro:"gift"`
	Digest    [4]byte           `avro:"digest"`
	Blob      []byte            `avro:"blob"`
	Ignored   string            `avro:"-"`
	unexposed int
}

const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
      {"name": "sku", "type": "string"},
      {"name": "qty", "type": "int"},
      {"name": "price", "type": "double"}]}}},
    {"name": "tags", "type": {"type": "map", "values": "string"}},
    {"name": "ship_to", "type": ["null", {"type": "record", "name": "Address", "fields": [
      {"name": "street", "type": "string"}, {"name": "city", "type": "string"}]}], "default": null},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "total_cents", "type": "long"},
    {"name": "ratio", "type": "float"},
    {"name": "gift", "type": "boolean"},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "blob", "type": "bytes"},
    {"name": "channel", "type": "string", "default": "web"}
  ]}`

func ptr[T any](v T) *T { return &v }

func sampleOrder() order {
	return order{
		ID:     "o-1",
		Placed: time.UnixMilli(1_700_000_000_123).UTC(),
		Status: "PAID",
		Lines:  []lineItem{{"mug", 2, 9.5}, {"tea", 1, 4.25}},
		Tags:   map[string]string{"src": "app"},
		Ship:   &address{"1 Main St", "Springfield"},
		Note:   ptr("leave at the door"),
		Total:  2325,
		Ratio:  0.5,
		Gift:   true,
		Digest: [4]byte{1, 2, 3, 4},
		Blob:   []byte{0, 0xff},
	}
}

func mustAvro[T any](t testing.TB, schema string, opts ...serde.AvroOption) serde.Serde[T] {
	t.Helper()
	s, err := serde.Avro[T](schema, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAvroRoundTrips(t *testing.T) {
	type recursive struct {
		Name     string       `avro:"name"`
		Children []*recursive `avro:"children"`
	}
	const treeSchema = `{"type":"record","name":"Node","fields":[
		{"name":"name","type":"string"},
		{"name":"children","type":{"type":"array","items":"Node"}}]}`
	type ints struct {
		A int8   `avro:"a"`
		B uint16 `avro:"b"`
		C int    `avro:"c"`
		D uint32 `avro:"d"`
	}
	const intsSchema = `{"type":"record","name":"Ints","fields":[
		{"name":"a","type":"int"},{"name":"b","type":"int"},{"name":"c","type":"long"},{"name":"d","type":"long"}]}`
	type micros struct {
		At  time.Time     `avro:"at"`
		Dur time.Duration `avro:"dur"`
	}
	const microsSchema = `{"type":"record","name":"M","fields":[
		{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"dur","type":"long"}]}`

	type clock struct {
		Day     time.Time     `avro:"day"`
		DayNum  int32         `avro:"day_num"`
		Opens   time.Duration `avro:"opens"`
		OpensMS int32         `avro:"opens_ms"`
		Closes  time.Duration `avro:"closes"`
		Tz      *string       `avro:"tz"`
	}
	const clockSchema = `{"type":"record","name":"Clock","fields":[
		{"name":"day","type":{"type":"int","logicalType":"date"}},
		{"name":"day_num","type":{"type":"int","logicalType":"date"}},
		{"name":"opens","type":{"type":"int","logicalType":"time-millis"}},
		{"name":"opens_ms","type":{"type":"int","logicalType":"time-millis"}},
		{"name":"closes","type":{"type":"long","logicalType":"time-micros"}},
		{"name":"tz","type":["null",{"type":"string","logicalType":"iana-zone"}]}]}`
	empty := sampleOrder()
	empty.Ship, empty.Note, empty.Lines, empty.Tags, empty.Blob = nil, nil, []lineItem{}, map[string]string{}, []byte{}
	tests := []struct {
		name      string
		schema    string
		roundTrip func(t *testing.T, schema string)
	}{
		{"nested record, array, map, enum, unions, fixed, bytes, timestamp", orderSchema, rt(sampleOrder())},
		{"null unions and empty collections", orderSchema, rt(empty)},
		{"negative and pre-epoch values", orderSchema, rt(func() order {
			o := sampleOrder()
			o.Placed, o.Total, o.Ratio = time.UnixMilli(-86_400_123).UTC(), -1, float32(math.Inf(-1))
			return o
		}())},
		{"recursive record", treeSchema, rt(recursive{"root", []*recursive{{"a", []*recursive{}}, {"b", []*recursive{{"c", []*recursive{}}}}}})},
		{"integer kinds at their limits", intsSchema, rt(ints{math.MinInt8, math.MaxUint16, math.MinInt64, math.MaxUint32})},
		{"timestamp-micros and durations", microsSchema, rt(micros{time.UnixMicro(1_700_000_000_123_456).UTC(), 90 * time.Second})},
		{"date and time-of-day logical types, unknown logical types", clockSchema,
			rt(clock{time.Unix(-3*86400, 0).UTC(), 19000, 9*time.Hour + 30*time.Minute, 1234, 17*time.Hour + time.Microsecond, ptr("Europe/Amsterdam")})},
		{"primitive string", `"string"`, rt("héllo")},
		{"primitive long", `"long"`, rt(int64(math.MaxInt64))},
		{"primitive double", `"double"`, rt(math.Pi)},
		{"top-level array", `{"type":"array","items":"int"}`, rt([]int32{3, -1, 7})},
		{"top-level map", `{"type":"map","values":"boolean"}`, rt(map[string]bool{"a": true, "b": false})},
		{"optional top-level", `["null","string"]`, rt(ptr("x"))},
		{"optional top-level null", `["null","string"]`, rt[*string](nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.roundTrip(t, tt.schema) })
	}
}

// rt round-trips v through Avro[T] plain and through the registry fake.
func rt[T any](v T) func(t *testing.T, schema string) {
	return func(t *testing.T, schema string) {
		t.Helper()
		fake := newFake(t)
		for name, s := range map[string]serde.Serde[T]{
			"plain":    mustAvro[T](t, schema),
			"registry": mustAvro[T](t, schema, serde.WithRegistry(fake.Client(t), "rt-value")),
		} {
			b, err := s.Encode([]byte("prefix"), v)
			if err != nil {
				t.Fatalf("%s: encode %+v: %v", name, v, err)
			}
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatalf("%s: encode did not append to dst: %x", name, b)
			}
			got, err := s.Decode(b[len("prefix"):])
			if err != nil {
				t.Fatalf("%s: decode %x: %v", name, b, err)
			}
			if !reflect.DeepEqual(got, v) {
				t.Fatalf("%s: round trip\n got %#v\nwant %#v", name, got, v)
			}
		}
	}
}

func TestAvroPlainEncodingIsAvroBinary(t *testing.T) {
	type pair struct {
		K string `avro:"k"`
		V int64  `avro:"v"`
	}
	s := mustAvro[pair](t, `{"type":"record","name":"P","fields":[{"name":"k","type":"string"},{"name":"v","type":"long"}]}`)
	got, err := s.Encode(nil, pair{"ab", -2})
	// Avro: string = zigzag length 2 (0x04) + bytes; long -2 = zigzag 3.
	if want := []byte{0x04, 'a', 'b', 0x03}; err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encode = %x, %v; want %x", got, err, want)
	}
}

func TestAvroRegistryWritesTheConfluentWireFormat(t *testing.T) {
	fake := newFake(t)
	s := mustAvro[order](t, orderSchema, serde.WithRegistry(fake.Client(t), "orders-value"))
	b, err := s.Encode(nil, sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	ids := fake.Subjects("orders-value")
	if len(ids) != 1 {
		t.Fatalf("subject orders-value holds %v, want one schema", ids)
	}
	plain, _ := mustAvro[order](t, orderSchema).Encode(nil, sampleOrder())
	if b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != uint32(ids[0]) || !bytes.Equal(b[5:], plain) {
		t.Fatalf("wire bytes %x, want 0x00, id %d, then the plain avro %x", b, ids[0], plain)
	}
}

func TestAvroBindingErrorsAtConstruction(t *testing.T) {
	type noField struct {
		ID string `avro:"id"`
	}
	type wrongType struct {
		ID int `avro:"id"`
	}
	type optionalNotPointer struct {
		Note string `avro:"note"`
	}
	type multiUnion struct {
		V *string `avro:"v"`
	}
	cases := []struct {
		name, want string
		build      func() error
	}{
		{"bad schema", "compile schema", func() error { _, err := serde.Avro[noField](`{"type":"record"}`); return err }},
		{"schema field without struct field or default", "no field for r.x",
			func() error {
				_, err := serde.Avro[noField](`{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"x","type":"int"}]}`)
				return err
			}},
		{"type mismatch", "does not fit", func() error {
			_, err := serde.Avro[wrongType](`{"type":"record","name":"r","fields":[{"name":"id","type":"string"}]}`)
			return err
		}},
		{"union needs a pointer", "needs a pointer", func() error {
			_, err := serde.Avro[optionalNotPointer](`{"type":"record","name":"r","fields":[{"name":"note","type":["null","string"]}]}`)
			return err
		}},
		{"unions of two types", "not supported", func() error {
			_, err := serde.Avro[multiUnion](`{"type":"record","name":"r","fields":[{"name":"v","type":["null","string","long"]}]}`)
			return err
		}},
		{"decimals", "decimal logical type is not supported", func() error {
			_, err := serde.Avro[[]byte](`{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`)
			return err
		}},
		{"registry without subject", "needs a client and a subject", func() error {
			_, err := serde.Avro[noField](`{"type":"record","name":"r","fields":[{"name":"id","type":"string"}]}`, serde.WithRegistry(nil, ""))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.build(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestAvroEncodeErrors(t *testing.T) {
	s := mustAvro[order](t, orderSchema)
	o := sampleOrder()
	o.Status = "LOST"
	if out, err := s.Encode([]byte("dst"), o); !errors.Is(err, serde.ErrEncode) || string(out) != "dst" || !strings.Contains(err.Error(), "LOST") {
		t.Fatalf("unknown enum symbol: %q, %v; want ErrEncode naming the symbol and dst unchanged", out, err)
	}
	type small struct {
		N int64 `avro:"n"`
	}
	si := mustAvro[small](t, `{"type":"record","name":"s","fields":[{"name":"n","type":"int"}]}`)
	if _, err := si.Encode(nil, small{math.MaxInt32 + 1}); !errors.Is(err, serde.ErrEncode) || !strings.Contains(err.Error(), "overflows") {
		t.Fatalf("int overflow: %v", err)
	}
	type nested struct {
		A *address `avro:"a"`
	}
	sn := mustAvro[nested](t, `{"type":"record","name":"n","fields":[{"name":"a","type":{"type":"record","name":"Address","fields":[
		{"name":"street","type":"string"},{"name":"city","type":"string"}]}}]}`)
	if _, err := sn.Encode(nil, nested{}); !errors.Is(err, serde.ErrEncode) || !strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("nil non-optional record: %v", err)
	}
}

func TestAvroPlainDecodeErrors(t *testing.T) {
	s := mustAvro[order](t, orderSchema)
	good, _ := s.Encode(nil, sampleOrder())
	for name, in := range map[string][]byte{
		"empty":           nil,
		"truncated":       good[:len(good)/2],
		"trailing bytes":  append(append([]byte{}, good...), 0),
		"bad enum index":  {0x02, 'x', 0x00, 0x7e},
		"negative length": {0x01},
		// id "x", placed_at 0, status NEW, then an array announcing 2^30
		// lines: rejected before goavro allocates for them.
		"array count beyond the payload": binary.AppendVarint([]byte{0x02, 'x', 0x00, 0x00}, 1<<30),
		"string longer than the payload": binary.AppendVarint(nil, 1<<30),
	} {
		if _, err := s.Decode(in); !errors.Is(err, serde.ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", name, err)
		}
	}
}
