package tidemarktest_test

import (
	"slices"
	"testing"

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
