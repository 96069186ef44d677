package tidemarktest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A foreign-key join answers each left row on the partition the row was
// read from, as Kafka Streams does (SubscriptionWrapper's primaryPartition):
// the left table's topic need not be partitioned by the default partitioner
// (a librdkafka producer hashes keys with crc32, a custom partitioner with
// anything), since the join never co-partitions it with anything. Rows
// sent to another partition than the default one of their key must join
// like the others, on both paths that answer (a new subscription and a
// change of the right row).
func TestForeignKeyJoinAnswersOnTheLeftRowsPartition(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			b := topology.NewBuilder("app")
			lines := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
			products := b.Table("products", serde.String(), serde.String(), topology.Named("products"))
			sku := func(_ string, l string) (string, bool) { return l, true }
			var j topology.Table[string, string]
			if left {
				j = lines.LeftJoinOnForeignKey(products, sku,
					func(k, l, p string, ok bool) string { return k + "/" + l + "/" + opt(p, ok) }, topology.Named("priced"))
			} else {
				j = lines.JoinOnForeignKey(products, sku,
					func(k, l, p string) string { return k + "/" + l + "/" + p }, topology.Named("priced"))
			}
			j.ToStream().To("priced-lines")
			d := newDriver(t, b, tidemarktest.WithPartitions("lines", 4), tidemarktest.WithPartitions("products", 2))
			lin := tidemarktest.Input(d, "lines", serde.String(), serde.String())
			pin := tidemarktest.Input(d, "products", serde.String(), serde.String())
			out := tidemarktest.Output(d, "priced-lines", serde.String(), serde.String())

			// Each line goes to the partition after its key's default one.
			keys := []string{"line-1", "line-2", "line-3"}
			for i, k := range keys {
				p := (topology.DefaultPartition([]byte(k), 4) + 1) % 4
				must(t, lin.PipeRecordTo(topology.Record[string, string]{Key: k, Value: "sku-a", Timestamp: int64(1 + i)}, p))
			}
			must(t, pin.Pipe("sku-a", "mug", 10))
			must(t, pin.Pipe("sku-a", "cup", 11))

			var got []string
			for _, r := range readAll(t, out) {
				got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
			}
			var want []string
			if left { // answered "not found" while sku-a is missing
				for i, k := range keys {
					want = append(want, fmt.Sprintf("%s=%s/sku-a/null@%d", k, k, 1+i))
				}
			}
			for _, p := range []struct {
				name string
				ts   int64
			}{{"mug", 10}, {"cup", 11}} {
				for _, k := range keys {
					want = append(want, fmt.Sprintf("%s=%s/sku-a/%s@%d", k, k, p.name, p.ts))
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("joined rows of lines on non-default partitions:\n got %v\nwant %v", got, want)
			}
		})
	}
}
