package tidemarktest_test

import (
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestTableJoinTombstoneForAbsentKey: a tombstone for a key one table does
// not hold reaches a table-table join as Change(null, null) (Kafka
// Streams' KTableSource forwards it). KTableKTableInnerJoin and
// KTableKTableLeftJoin forward Change(null, null), timestamped with the
// later of the record and the other row, whenever the other table holds
// the key, so toStream() writes a tombstone; KTableKTableRightJoin and
// KTableKTableOuterJoin join the other row with null; with the other row
// missing, all four forward nothing.
func TestTableJoinTombstoneForAbsentKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		join func(l, r topology.Table[string, string]) topology.Table[string, string]
		want []string
	}{{
		name: "inner",
		join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return l.Join(r, func(_ string, a, b string) string { return a + ":" + b })
		},
		want: []string{"k=∅@9", "k=L1:R1@9", "j=∅@7"},
	}, {
		name: "left",
		join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return l.LeftJoin(r, func(_ string, a, b string, ok bool) string { return a + ":" + opt(b, ok) })
		},
		want: []string{"k=∅@9", "k=L1:R1@9", "j=L2:null@6", "j=L2:null@7"},
	}, {
		name: "outer",
		join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return l.OuterJoin(r, func(_ string, a string, aok bool, b string, bok bool) string { return opt(a, aok) + ":" + opt(b, bok) })
		},
		want: []string{"k=null:R1@9", "k=null:R1@9", "k=L1:R1@9", "j=L2:null@6", "j=L2:null@7"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			l := b.Table("l", serde.String(), serde.String(), topology.Named("lt"))
			r := b.Table("r", serde.String(), serde.String(), topology.Named("rt"))
			tc.join(l, r).ToStream().To("out")
			d := newDriver(t, b)
			lin := tidemarktest.Input(d, "l", serde.String(), serde.String())
			rin := tidemarktest.Input(d, "r", serde.String(), serde.String())
			out := tidemarktest.Output(d, "out", serde.String(), serde.String())
			must(t, rin.Pipe("k", "R1", 9))
			must(t, lin.PipeTombstone("x", 2)) // neither table holds x
			must(t, lin.PipeTombstone("k", 3)) // only the right table holds k
			must(t, rin.PipeTombstone("y", 4)) // neither table holds y
			must(t, lin.Pipe("k", "L1", 5))
			must(t, lin.Pipe("j", "L2", 6))
			must(t, rin.PipeTombstone("j", 7)) // only the left table holds j
			if got := changes(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("changes %v, Kafka Streams %v", got, tc.want)
			}
		})
	}
}
