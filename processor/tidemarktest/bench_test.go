package tidemarktest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// reportRate adds records/s; allocs/op from -benchmem is per record, since
// one op pipes one record.
func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%04d", i)
	}
	return out
}

// BenchmarkStatelessChain pipes records through filter -> mapValues ->
// selectKey -> sink, through the driver and the task core.
func BenchmarkStatelessChain(b *testing.B) {
	tb := topology.NewBuilder("bench")
	tb.Stream("in", serde.String(), serde.Int64()).
		Filter(func(_ string, v int64) bool { return v >= 0 }).
		MapValues(func(_ string, v int64) int64 { return v * 2 }).
		SelectKey(func(k string, _ int64) string { return k }).
		To("out")
	d := newDriver(b, tb)
	in := tidemarktest.Input(d, "in", serde.String(), serde.Int64())
	out := tidemarktest.Output(d, "out", serde.String(), serde.Int64())
	ks := keys(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := in.Pipe(ks[i&1023], int64(i), int64(i)); err != nil {
			b.Fatal(err)
		}
		if i&4095 == 4095 {
			out.Discard()
		}
	}
	reportRate(b)
}

// BenchmarkWindowedCount counts 1024 keys in 1-minute tumbling windows in
// the in-memory window store, emitting every update.
func BenchmarkWindowedCount(b *testing.B) {
	tb := topology.NewBuilder("bench")
	g := tb.Stream("in", serde.String(), serde.Int64()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(time.Minute, 10*time.Second)).
		Count(topology.Named("counts")).ToStream().To("out")
	d := newDriver(b, tb)
	in := tidemarktest.Input(d, "in", serde.String(), serde.Int64())
	out := tidemarktest.Output(d, "out", topology.TimeWindowedSerde(serde.String(), time.Minute), serde.Int64())
	ks := keys(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// About 100 records per ms of event time: windows close as it runs.
		if err := in.Pipe(ks[i&1023], 1, int64(i/100)); err != nil {
			b.Fatal(err)
		}
		if i&4095 == 4095 {
			out.Discard()
		}
	}
	reportRate(b)
}
