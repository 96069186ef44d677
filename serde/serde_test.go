package serde_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

func TestEncodingsMatchKafkaJavaSerializers(t *testing.T) {
	tests := []struct {
		name string
		got  func() ([]byte, error)
		want []byte
	}{
		{"string is utf-8", func() ([]byte, error) { return serde.String().Encode(nil, "sku-é") }, []byte("sku-é")},
		{"int64 is big-endian two's complement", func() ([]byte, error) { return serde.Int64().Encode(nil, -2) },
			[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}},
		{"float64 is big-endian ieee754", func() ([]byte, error) { return serde.Float64().Encode(nil, 1.5) },
			[]byte{0x3f, 0xf8, 0, 0, 0, 0, 0, 0}},
		{"encode appends to dst", func() ([]byte, error) { return serde.String().Encode([]byte("k:"), "v") }, []byte("k:v")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("got %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}

func TestRoundTrips(t *testing.T) {
	type order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	roundTrip(t, serde.String(), "cart-42")
	roundTrip(t, serde.Int64(), math.MinInt64)
	roundTrip(t, serde.Float64(), math.Inf(-1))
	roundTrip(t, serde.JSON[order](), order{ID: "o-1", Total: 12.5})
	b, _ := serde.Bytes().Encode(nil, []byte{1, 2})
	if got, _ := serde.Bytes().Decode(b); !bytes.Equal(got, []byte{1, 2}) {
		t.Fatalf("bytes round trip: %x", got)
	}
}

func roundTrip[T comparable](t *testing.T, s serde.Serde[T], v T) {
	t.Helper()
	b, err := s.Encode(nil, v)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	got, err := s.Decode(b)
	if err != nil || got != v {
		t.Fatalf("decode %x: got %v, %v; want %v", b, got, err, v)
	}
}

func TestBytesDecodeCopiesSoBuffersCanBeReused(t *testing.T) {
	buf := []byte("abc")
	got, _ := serde.Bytes().Decode(buf)
	buf[0] = 'x'
	if string(got) != "abc" {
		t.Fatalf("decoded value aliases the input buffer: %q", got)
	}
}

func TestDecodeFailuresWrapErrDecode(t *testing.T) {
	_, errInt := serde.Int64().Decode([]byte{1, 2, 3})
	_, errFloat := serde.Float64().Decode(nil)
	_, errJSON := serde.JSON[map[string]int]().Decode([]byte("{not json"))
	for name, err := range map[string]error{"int64": errInt, "float64": errFloat, "json": errJSON} {
		if !errors.Is(err, serde.ErrDecode) {
			t.Errorf("%s: error %v does not wrap ErrDecode", name, err)
		}
	}
}

func TestBytesDecodeKeepsEmptyApartFromNil(t *testing.T) {
	empty, _ := serde.Bytes().Decode([]byte{})
	if empty == nil || len(empty) != 0 {
		t.Fatalf("empty bytes decoded to %#v, want a non-nil empty slice", empty)
	}
	if null, _ := serde.Bytes().Decode(nil); null != nil {
		t.Fatalf("nil decoded to %#v, want nil", null)
	}
}

func TestJSONNullIsTheSerdesNull(t *testing.T) {
	n, ok := serde.JSON[struct{ A int }]().(serde.Nuller)
	if !ok {
		t.Fatal("serde.JSON is not a Nuller")
	}
	for in, want := range map[string]bool{"null": true, " null\n": true, `"null"`: false, "{}": false, "": false, "nul": false} {
		if got := n.IsNull([]byte(in)); got != want {
			t.Errorf("IsNull(%q) = %v, want %v", in, got, want)
		}
	}
	if _, ok := serde.String().(serde.Nuller); ok {
		t.Error("serde.String has a null of its own: the string \"null\" would be a tombstone")
	}
}
