package tidemarktest_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A row that Table.GroupBy's function maps to a null value (a nil pointer,
// slice, map or interface) joins no group, as one mapped to a null key
// does: Kafka Streams' KTableRepartitionMap forwards a pair only when its
// key and its value are both non-null, so its adder and subtractor never
// see a null and its Count does not count the row. tidemark counted it,
// and handed the adder and subtractor nil values. Here rows whose note is
// empty map to a nil note: only rows with a note are counted per group.
func TestTableGroupByDropsRowsMappedToANullValue(t *testing.T) {
	type row struct {
		Group string
		Note  *string
	}
	b := topology.NewBuilder("app")
	b.Table("rows", serde.String(), serde.JSON[row](), topology.Named("rows")).
		GroupBy(func(_ string, r row) (string, *string) { return r.Group, r.Note }, serde.String(), serde.JSON[*string](),
			topology.Named("by-group")).
		Count(topology.Named("noted")).
		ToStream().To("noted")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "rows", serde.String(), serde.JSON[row]())
	note := func(s string) *string { return &s }
	must(t, in.Pipe("r1", row{"g", note("a")}, 1)) // g: 1
	must(t, in.Pipe("r2", row{"g", nil}, 2))       // no note: not counted
	must(t, in.Pipe("r2", row{"g", note("b")}, 3)) // g: 2 (added, nothing to subtract)
	must(t, in.Pipe("r1", row{"g", nil}, 4))       // g: 1 (subtracted, nothing to add)
	must(t, in.PipeTombstone("r1", 5))             // r1 counted nowhere: no change
	var got []int64
	for _, r := range readAll(t, tidemarktest.Output(d, "noted", serde.String(), serde.Int64())) {
		got = append(got, r.Value)
	}
	if want := []int64{1, 2, 1}; !equalInts(got, want) {
		t.Errorf("counts of g %v, want %v", got, want)
	}
	// Null pairs: r2's first value (added), then subtracted; r1's last
	// value (added), then subtracted by its delete.
	if n := d.Metrics().Dropped[topology.DropSkipped]; n != 4 {
		t.Errorf("skipped %d null-valued pairs, want 4", n)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
