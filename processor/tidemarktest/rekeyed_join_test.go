package tidemarktest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A stream re-keyed before a stream-table join runs when its source topic
// and the table's have different partition counts, as in Kafka Streams:
// the repartition topic is sized like the table, and every order meets
// its customer.
func TestRekeyedStreamJoinsTableWithOtherPartitionCount(t *testing.T) {
	b := topology.NewBuilder("app")
	customers := b.Table("customers", serde.String(), serde.String(), topology.Named("customers"))
	b.Stream("orders", serde.String(), serde.String()).
		SelectKey(func(_ string, customer string) string { return customer }).
		JoinTable(customers, func(_ string, _ string, name string) string { return name }, topology.Named("with-customer")).
		To("out")
	d := newDriver(t, b, tidemarktest.WithPartitions("orders", 6), tidemarktest.WithPartitions("customers", 2))
	cin := tidemarktest.Input(d, "customers", serde.String(), serde.String())
	oin := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	var want []string
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		must(t, cin.Pipe(c, "name-"+c, int64(i)))
		want = append(want, c+"=name-"+c)
	}
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		must(t, oin.Pipe("order-"+c, c, int64(10+i)))
	}
	var got []string
	for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String())) {
		got = append(got, r.Key+"="+r.Value)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Both inputs of a stream-stream join re-keyed, from topics with 6 and 3
// partitions: as in Kafka Streams, both repartition topics get the larger
// count and the app runs, instead of failing as not co-partitioned.
func TestBothRekeyedStreamsJoinWithOtherPartitionCounts(t *testing.T) {
	b := topology.NewBuilder("app")
	byValue := func(_ string, v string) string { return v }
	visits := b.Stream("visits", serde.String(), serde.String()).SelectKey(byValue)
	b.Stream("orders", serde.String(), serde.String()).SelectKey(byValue).
		Join(visits, func(c, _, _ string) string { return "met-" + c },
			topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).
		To("out")
	d := newDriver(t, b, tidemarktest.WithPartitions("orders", 6), tidemarktest.WithPartitions("visits", 3))
	vin := tidemarktest.Input(d, "visits", serde.String(), serde.String())
	oin := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	var want []string
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		must(t, vin.Pipe("visit-"+c, c, int64(i)))
		must(t, oin.Pipe("order-"+c, c, int64(10+i)))
		want = append(want, c+"=met-"+c)
	}
	var got []string
	for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String())) {
		got = append(got, r.Key+"="+r.Value)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A cogroup of an input regrouped by GroupBy (6 partitions) and one read
// from a topic keyed already (3 partitions) runs, as in Kafka Streams: the
// repartition topic gets the other input's count.
func TestCogroupRegroupedInputTakesOtherInputsPartitionCount(t *testing.T) {
	b := topology.NewBuilder("app")
	byValue := func(_ string, v string) string { return v }
	visits := b.Stream("visits", serde.String(), serde.String()).GroupByKey()
	b.Stream("orders", serde.String(), serde.String()).GroupBy(byValue, serde.String(), topology.Named("orders-by-customer")).
		Cogroup(func(_, _ string, n int64) int64 { return n + 1 }).
		Cogroup(visits, func(_, _ string, n int64) int64 { return n + 100 }).
		Aggregate(func() int64 { return 0 }, serde.Int64(), topology.Named("agg")).
		ToStream().To("out")
	d := newDriver(t, b, tidemarktest.WithPartitions("orders", 6), tidemarktest.WithPartitions("visits", 3))
	vin := tidemarktest.Input(d, "visits", serde.String(), serde.String())
	oin := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		must(t, vin.Pipe(c, "v", int64(i)))
		must(t, oin.Pipe("order-"+c, c, int64(10+i)))
	}
	last := map[string]int64{}
	for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.Int64())) {
		last[r.Key] = r.Value
	}
	for _, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		if last[c] != 101 {
			t.Errorf("%s: aggregate %d, want 101 (one visit and one order in one task): %v", c, last[c], last)
		}
	}
}
