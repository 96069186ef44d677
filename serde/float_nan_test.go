package serde_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

// Kafka's DoubleSerializer writes Double.doubleToLongBits(v), which maps
// every NaN to the canonical 0x7ff8000000000000. Go's math.NaN() is
// 0x7ff8000000000001, and a NaN computed at run time may carry any
// payload: Float64 must write the same 8 bytes Kafka does, or a NaN key
// lands in another partition and store row than Kafka Streams puts it.
func TestFloat64NaNIsKafkasCanonicalNaN(t *testing.T) {
	want := []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0}
	for _, bits := range []uint64{
		math.Float64bits(math.NaN()), // 0x7ff8000000000001
		0x7ff0000000000001,           // signalling NaN
		0xfff8000000000000,           // negative quiet NaN
		0x7fffffffffffffff,
	} {
		v := math.Float64frombits(bits)
		got, err := serde.Float64().Encode(nil, v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Encode(NaN %#x) = %x, %v; want %x, as Kafka's DoubleSerializer", bits, got, err, want)
		}
	}
	// Other values keep their bits, -0 included (doubleToLongBits keeps its sign).
	for v, w := range map[float64][]byte{
		math.Copysign(0, -1): {0x80, 0, 0, 0, 0, 0, 0, 0},
		-1.5:                 {0xbf, 0xf8, 0, 0, 0, 0, 0, 0},
		math.Inf(1):          {0x7f, 0xf0, 0, 0, 0, 0, 0, 0},
	} {
		if got, err := serde.Float64().Encode(nil, v); err != nil || !bytes.Equal(got, w) {
			t.Errorf("Encode(%v) = %x, %v; want %x", v, got, err, w)
		}
	}
}
