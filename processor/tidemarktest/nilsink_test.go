package tidemarktest_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Kafka's serializers, Confluent's Avro serializer among them, map a null
// value to a null Kafka value: a joiner (or processor) that yields null
// writes a tombstone. A nil value (pointer, slice, map, interface) that
// reaches a sink without being a tombstone already is one too: the sink
// writes a null value without calling the serde, so an Avro serde bound
// to a non-optional record does not fail the app on it ("nil pointer for
// non-optional"), and serde.Bytes does not write an empty value for it.
func TestSinksWriteANilValueAsATombstone(t *testing.T) {
	type price struct {
		SKU   string `avro:"sku"`
		Cents int64  `avro:"cents"`
	}
	prices, err := serde.Avro[*price](`{"type":"record","name":"Price","fields":[{"name":"sku","type":"string"},{"name":"cents","type":"long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder("nil-sink")
	catalog := b.Table("catalog", serde.String(), serde.Int64(), topology.Named("catalog"))
	orders := b.Stream("orders", serde.String(), serde.String())
	orders.LeftJoinTable(catalog, func(sku, _ string, cents int64, found bool) *price {
		if !found {
			return nil
		}
		return &price{SKU: sku, Cents: cents}
	}).WithSerdes(serde.String(), prices).To("priced")
	orders.LeftJoinTable(catalog, func(sku, _ string, _ int64, found bool) []byte {
		if !found {
			return nil
		}
		return []byte(sku)
	}).WithSerdes(serde.String(), serde.Bytes()).To("priced-bytes")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := tidemarktest.Input(d, "catalog", serde.String(), serde.Int64()).Pipe("mug", 900, 1); err != nil {
		t.Fatal(err)
	}
	in := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	for i, sku := range []string{"mug", "lamp"} {
		if err := in.Pipe(sku, "o", int64(i+2)); err != nil {
			t.Fatalf("order for %s: %v", sku, err)
		}
	}
	got, err := tidemarktest.Output(d, "priced", serde.String(), prices).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Tombstone || got[0].Value.Cents != 900 || !got[1].Tombstone || got[1].Key != "lamp" {
		t.Fatalf("priced: %+v; want mug's price, then a tombstone for lamp", got)
	}
	raw, err := tidemarktest.Output(d, "priced-bytes", serde.String(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || string(raw[0].Value) != "mug" || !raw[1].Tombstone {
		t.Fatalf("priced-bytes: %+v; want mug, then a tombstone (not an empty value) for lamp", raw)
	}
}
