package processor

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A stream re-keyed before a stream-table join, or before a stream-stream
// join whose other input is not re-keyed, is repartitioned through a topic
// sized like the other input, as Kafka Streams sizes a join's repartition
// topic to co-partition it: orders (6 partitions) re-keyed by customer and
// joined with customers (2 partitions). Sized like orders, the app would
// refuse to start (inputs not co-partitioned). Two re-keyed inputs both
// get the larger count, or the fixed one (Kafka Streams'
// CopartitionedTopicsEnforcer).
func TestSizeLayoutRekeyedJoinInput(t *testing.T) {
	t.Parallel()
	byCustomer := func(_ string, v string) string { return v }
	cases := []struct {
		name  string
		build func(b *topology.Builder)
		want  map[string]int32 // repartition topic -> partitions
	}{
		{"stream-table", func(b *topology.Builder) {
			customers := b.Table("customers", serde.String(), serde.String(), topology.Named("customers"))
			b.Stream("orders", serde.String(), serde.String()).SelectKey(byCustomer).
				JoinTable(customers, func(_, o, c string) string { return o + c }, topology.Named("j")).To("out")
		}, map[string]int32{"app-j-left-repartition": 2}},
		{"stream-table-left", func(b *topology.Builder) {
			customers := b.Table("customers", serde.String(), serde.String(), topology.Named("customers"))
			b.Stream("orders", serde.String(), serde.String()).SelectKey(byCustomer).
				LeftJoinTable(customers, func(_, o, c string, _ bool) string { return o + c }, topology.Named("j")).To("out")
		}, map[string]int32{"app-j-left-repartition": 2}},
		{"stream-stream-left-rekeyed", func(b *topology.Builder) {
			visits := b.Stream("visits", serde.String(), serde.String())
			b.Stream("orders", serde.String(), serde.String()).SelectKey(byCustomer).
				Join(visits, func(_, o, v string) string { return o + v }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-j-left-repartition": 3}},
		{"stream-stream-right-rekeyed", func(b *topology.Builder) {
			orders := b.Stream("orders", serde.String(), serde.String()).SelectKey(byCustomer)
			b.Stream("visits", serde.String(), serde.String()).
				LeftJoin(orders, func(_, v, o string, _ bool) string { return v + o }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-j-right-repartition": 3}},
		{"stream-stream-both-rekeyed", func(b *topology.Builder) {
			orders := b.Stream("orders", serde.String(), serde.String()).SelectKey(byCustomer)
			b.Stream("visits", serde.String(), serde.String()).SelectKey(byCustomer).
				OuterJoin(orders, func(_, v string, _ bool, o string, _ bool) string { return v + o }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-j-left-repartition": 6, "app-j-right-repartition": 6}}, // the larger of 3 and 6
		{"stream-stream-both-repartitioned", func(b *topology.Builder) {
			orders := b.Stream("orders", serde.String(), serde.String()).Repartition(topology.Named("o"))
			b.Stream("visits", serde.String(), serde.String()).Repartition(topology.Named("v")).
				Join(orders, func(_, v, o string) string { return v + o }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-o-repartition": 6, "app-v-repartition": 6}},
		{"stream-stream-one-fixed", func(b *topology.Builder) {
			orders := b.Stream("orders", serde.String(), serde.String()).Repartition(topology.Named("o"))
			b.Stream("visits", serde.String(), serde.String()).Repartition(topology.WithPartitions(2), topology.Named("v")).
				Join(orders, func(_, v, o string) string { return v + o }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-o-repartition": 2, "app-v-repartition": 2}},
		{"stream-stream-repartitioned-and-source", func(b *topology.Builder) {
			visits := b.Stream("visits", serde.String(), serde.String())
			b.Stream("orders", serde.String(), serde.String()).Repartition(topology.Named("o")).
				Join(visits, func(_, o, v string) string { return o + v }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("j")).To("out")
		}, map[string]int32{"app-o-repartition": 3}},
		{"cogroup-both-regrouped", func(b *topology.Builder) {
			visits := b.Stream("visits", serde.String(), serde.String()).GroupBy(byCustomer, serde.String(), topology.Named("v"))
			b.Stream("orders", serde.String(), serde.String()).GroupBy(byCustomer, serde.String(), topology.Named("o")).
				Cogroup(func(_, _ string, n int64) int64 { return n + 1 }).
				Cogroup(visits, func(_, _ string, n int64) int64 { return n + 1 }).
				Aggregate(func() int64 { return 0 }, serde.Int64(), topology.Named("agg")).ToStream().To("out")
		}, map[string]int32{"app-o-repartition": 6, "app-v-repartition": 6}},
		{"cogroup-regrouped-and-source", func(b *topology.Builder) {
			visits := b.Stream("visits", serde.String(), serde.String()).GroupByKey()
			b.Stream("orders", serde.String(), serde.String()).GroupBy(byCustomer, serde.String(), topology.Named("o")).
				Cogroup(func(_, _ string, n int64) int64 { return n + 1 }).
				Cogroup(visits, func(_, _ string, n int64) int64 { return n + 1 }).
				Aggregate(func() int64 { return 0 }, serde.Int64(), topology.Named("agg")).ToStream().To("out")
		}, map[string]int32{"app-o-repartition": 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			c.build(b)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			l := &layout{partitions: map[string]int32{"orders": 6, "customers": 2, "visits": 3, "out": 1}}
			err = sizeLayout(topo, l)
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), "co-partitioned") {
					t.Fatalf("sizeLayout: %v, want a co-partitioning error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("sizeLayout: %v\n%s", err, topo.Describe())
			}
			for topic, want := range c.want {
				if got := l.partitions[topic]; got != want {
					t.Errorf("%s has %d partitions, want %d (tasks %v)", topic, got, want, l.tasks)
				}
			}
		})
	}
}
