package gen

import (
	"testing"
	"time"
)

// BenchmarkGenerateAndEncode measures how many events per second one core
// generates and encodes, the ceiling for `tidemark gen` before Kafka.
func BenchmarkGenerateAndEncode(b *testing.B) {
	for _, f := range []Format{FormatAvro, FormatJSON} {
		b.Run(string(f), func(b *testing.B) {
			g := mustNew(b, Config{Seed: 1, Format: f, Profile: Profile{Rate: 10000}})
			var bytes int64
			start := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				r, err := g.NextRecord()
				if err != nil {
					b.Fatal(err)
				}
				bytes += int64(len(r.Key) + len(r.Value))
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64(bytes)/float64(b.N), "B/event")
		})
	}
}

func BenchmarkGenerateOnly(b *testing.B) {
	g := mustNew(b, Config{Seed: 1, Profile: Profile{Rate: 10000}})
	start := time.Now()
	for b.Loop() {
		g.Next()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
