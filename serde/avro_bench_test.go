package serde_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

func BenchmarkAvro(b *testing.B) {
	fake := newFake(b)
	for name, s := range map[string]serde.Serde[order]{
		"plain":    mustAvro[order](b, orderSchema),
		"registry": mustAvro[order](b, orderSchema, serde.WithRegistry(fake.Client(b), "orders-value")),
	} {
		v := sampleOrder()
		enc, err := s.Encode(nil, v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			for b.Loop() {
				if _, err := s.Encode(buf[:0], v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
