package tidemarktest_test

import (
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A JSON source reads the value null as a tombstone and the key null as a
// null key, as Kafka Streams does with a JSON serde that returns null: a
// count skips both instead of counting a zero struct.
func TestJSONNullIsATombstoneOrANullKeyAtTheSource(t *testing.T) {
	type order struct{ N int }
	b := topology.NewBuilder("json-null")
	b.Stream("orders", serde.JSON[order](), serde.JSON[order]()).GroupByKey().Count().ToStream().To("counts")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := tidemarktest.Input(d, "orders", serde.Bytes(), serde.Bytes())
	for _, kv := range [][2]string{{`{"N":1}`, `{"N":1}`}, {`{"N":1}`, `null`}, {`{"N":2}`, ` null `}, {`null`, `{"N":3}`}} {
		if err := in.Pipe([]byte(kv[0]), []byte(kv[1]), 1); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tidemarktest.Output(d, "counts", serde.JSON[order](), serde.Int64()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != (order{N: 1}) || got[0].Value != 1 {
		t.Fatalf("counts %v, want only {1} counted once", got)
	}
	if m := d.Metrics().DroppedBy; len(m) == 0 {
		t.Fatal("no drops counted for the null key and the tombstones")
	}
}

// A global table reads a JSON null value as a tombstone: the row is
// deleted, not replaced by a zero struct.
func TestJSONNullDeletesAGlobalTableRow(t *testing.T) {
	type rate struct{ R int }
	b := topology.NewBuilder("json-null-global")
	rates := b.GlobalTable("rates", serde.String(), serde.JSON[rate](), topology.Named("rates"))
	b.Stream("orders", serde.String(), serde.String()).
		LeftJoinGlobal(rates, func(k, _ string) string { return k }, func(_, _ string, r rate, found bool) string {
			return fmt.Sprintf("%d:%v", r.R, found)
		}).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	gin := tidemarktest.Input(d, "rates", serde.String(), serde.Bytes())
	sin := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	for _, step := range []struct{ rate, want string }{{`{"R":7}`, "7:true"}, {`null`, "0:false"}} {
		if err := gin.Pipe("m", []byte(step.rate), 1); err != nil {
			t.Fatal(err)
		}
		if err := sin.Pipe("m", "o", 1); err != nil {
			t.Fatal(err)
		}
		got, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Value != step.want {
			t.Fatalf("after rate %s: joined %v, want %s", step.rate, got, step.want)
		}
	}
}

// A JSON sink writes a value that encodes to null (a nil pointer) as a
// tombstone and such a key as a null Kafka key, as a Kafka Streams JSON
// serializer returns null for null: a compacted output topic deletes the
// row, and tidemark's own JSON source reads it back the same way.
func TestJSONSinkWritesNullAsATombstoneAndANullKey(t *testing.T) {
	type item struct{ N int }
	b := topology.NewBuilder("json-null-sink")
	b.Stream("in", serde.String(), serde.String()).
		Map(func(k, v string) (*item, *item) {
			var key, val *item
			if k != "nil" {
				key = &item{N: len(k)}
			}
			if v != "nil" {
				val = &item{N: len(v)}
			}
			return key, val
		}).
		WithSerdes(serde.JSON[*item](), serde.JSON[*item]()).
		To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	for _, kv := range [][2]string{{"ab", "abc"}, {"ab", "nil"}, {"nil", "abcd"}} {
		if err := in.Pipe(kv[0], kv[1], 1); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tidemarktest.Output(d, "out", serde.Bytes(), serde.Bytes()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d outputs, want 3", len(got))
	}
	if got[0].NullKey || got[0].Tombstone || string(got[0].Value) != `{"N":3}` {
		t.Errorf("first output %+v, want key {N:2} and value {N:3}", got[0])
	}
	if got[1].NullKey || !got[1].Tombstone {
		t.Errorf("a nil value was written as %q (tombstone %v), want a tombstone", got[1].Value, got[1].Tombstone)
	}
	if !got[2].NullKey || got[2].Tombstone {
		t.Errorf("a nil key was written as %q (null key %v), want a null Kafka key", got[2].Key, got[2].NullKey)
	}
}
