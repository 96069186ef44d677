package tidemarktest_test

import (
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// WithPartitioner on Table.GroupBy, which the option docs and the README
// list among its options, takes a partitioner of the new key and value, as
// on a grouped stream. It could not build: the repartition sink checked it
// against the internal change record the topic carries (a type the user
// cannot name), so Build failed for every partitioner. Here it routes
// every group to partition 0 of the repartition topic, and each group's
// count (subtractions and additions alike) lands there.
func TestTableGroupByTakesAPartitionerOfTheNewKeyAndValue(t *testing.T) {
	var seen []string
	b := topology.NewBuilder("app")
	b.Table("stock", serde.String(), serde.String(), topology.Named("stock")).
		GroupBy(func(item, warehouse string) (string, string) { return warehouse, item }, serde.String(), serde.String(),
			topology.Named("by-warehouse"),
			topology.WithPartitioner(func(topic, warehouse, item string, n int32) int32 {
				seen = append(seen, warehouse+"/"+item)
				return 0
			})).
		Count(topology.Named("per-warehouse"))
	d := newDriver(t, b, tidemarktest.WithDefaultPartitions(2))
	in := tidemarktest.Input(d, "stock", serde.String(), serde.String())
	for i, r := range [][2]string{{"mug", "north"}, {"lamp", "south"}, {"desk", "north"}, {"mug", "south"}} {
		must(t, in.Pipe(r[0], r[1], int64(i)))
	}
	// mug moves: subtracted from north (its old value), added to south.
	if want := "[north/mug south/lamp north/desk north/mug south/mug]"; fmt.Sprint(seen) != want {
		t.Errorf("partitioner saw %v, want %s", seen, want)
	}
	for p := range int32(2) {
		s, err := d.Store("per-warehouse", p)
		must(t, err)
		must(t, s.(store.KeyValue).Range(nil, nil, func(k, v []byte) bool {
			if p != 0 {
				t.Errorf("group %q counted in partition %d, want 0", k, p)
			}
			return true
		}))
	}
	rows, err := tidemarktest.ReadStore(d, "per-warehouse", serde.String(), serde.Int64())
	must(t, err)
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Key] = r.Value
	}
	if got["north"] != 1 || got["south"] != 2 || len(got) != 2 {
		t.Errorf("counts %v, want north=1 south=2", got)
	}
}
