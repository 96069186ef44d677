package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// BenchmarkTxnCommitOneRecord measures begin + produce one record + commit on
// the real broker: the fixed cost a commit adds, which seeds the frontier
// controller's commit-latency prior. Run with -benchtime=200x for the
// figures in the README.
func BenchmarkTxnCommitOneRecord(b *testing.B) {
	topic := kafkatest.NewTopic(b, 1, nil)
	cl := kafkatest.Client(b, kgo.TransactionalID(kafkatest.UniqueName(b, "bench")),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	commit := func() time.Duration {
		start := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			b.Fatalf("begin: %v", err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			b.Fatalf("produce: %v", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatalf("commit: %v", err)
		}
		return time.Since(start)
	}
	commit() // the first transaction finds the coordinator and inits the producer id
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	b.ResetTimer()
	for b.Loop() {
		_ = hist.RecordValue(commit().Microseconds())
	}
	b.ReportMetric(float64(hist.ValueAtQuantile(50))/1000, "p50-ms")
	b.ReportMetric(float64(hist.ValueAtQuantile(99))/1000, "p99-ms")
}
