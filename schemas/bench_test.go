package schemas

import (
	"context"
	"testing"
)

func BenchmarkPaymentAvro(b *testing.B) {
	s := Payment.Avro()
	v := samplePayment()
	enc, _ := s.Encode(nil, v)
	b.Run("encode", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf, _ = s.Encode(buf[:0], v)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-registry-v1-writer", func(b *testing.B) {
		fake, reg := newFakeRegistry(b)
		clicks, err := Click.Registry(context.Background(), reg, "clicks-value")
		if err != nil {
			b.Fatal(err)
		}
		rec := wire(fake.Add("clicks-value", clickV1), encodeWith(b, clickV1, clickV1Native()))
		for b.Loop() {
			if _, err := clicks.Decode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
