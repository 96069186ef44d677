package tidemarktest_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A nil value returned by MapValues, Map, FlatMap or FlatMapValues is a
// tombstone, as a null value is in Kafka Streams: a count right after it
// skips the record, as it would after a repartition (where serde.JSON
// writes it as null), and ToTable deletes the key's row instead of
// storing a nil value.
func TestNilValuesFromUserFunctionsAreTombstones(t *testing.T) {
	type item struct{ N int }
	keep := func(v string) *item {
		if v == "drop" {
			return nil
		}
		return &item{N: len(v)}
	}
	b := topology.NewBuilder("nil-values")
	in := b.Stream("in", serde.String(), serde.String())
	mapped := in.MapValues(func(_ string, v string) *item { return keep(v) }).WithSerdes(nil, serde.JSON[*item]())
	mapped.GroupByKey().Count().ToStream().To("count-mapvalues")
	in.Map(func(k, v string) (string, *item) { return k, keep(v) }).WithSerdes(nil, serde.JSON[*item]()).
		GroupByKey().Count().ToStream().To("count-map")
	in.FlatMapValues(func(_ string, v string) []*item { return []*item{keep(v)} }).WithSerdes(nil, serde.JSON[*item]()).
		GroupByKey().Count().ToStream().To("count-flatmapvalues")
	mapped.ToTable(topology.Named("latest")).ToStream().To("latest")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := tidemarktest.Input(d, "in", serde.String(), serde.String())
	for i, v := range []string{"a", "drop", "bb"} {
		if err := src.Pipe("k", v, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"count-mapvalues", "count-map", "count-flatmapvalues"} {
		got, err := tidemarktest.Output(d, topic, serde.String(), serde.Int64()).ReadKeyValues()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].Value != 2 {
			t.Errorf("%s: %v, want counts 1 and 2 (the nil value skipped)", topic, got)
		}
	}
	latest, err := tidemarktest.Output(d, "latest", serde.String(), serde.Bytes()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 3 || latest[1].Value != nil || string(latest[2].Value) != `{"N":2}` {
		t.Fatalf("latest: %v, want a row, its delete (a tombstone), a row", latest)
	}
}
