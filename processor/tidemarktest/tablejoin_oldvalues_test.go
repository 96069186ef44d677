package tidemarktest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestTableTableJoinForwardsOldValues checks that a table-table join passes
// the joined row it replaces downstream, as Kafka Streams does when an
// operator downstream needs old values: Table.GroupBy must subtract the old
// row from its group, and Filter must let a delete through. The join's rows
// are grouped by their own value and counted, so the counts show which rows
// exist. The expected outputs follow KTableKTableInnerJoin, LeftJoin,
// RightJoin and OuterJoin with sendOldValues, then KTableRepartitionMap
// (subtract before add; one replace when the group stays, KIP-904) and
// KTableAggregate (timestamp = max of the update and the old aggregate).
func TestTableTableJoinForwardsOldValues(t *testing.T) {
	type rec struct {
		key  string
		n    int64 // the group's count
		ts   int64
		tomb bool
	}
	cases := []struct {
		name string
		join func(l, r topology.Table[string, string]) topology.Table[string, string]
		// counts of the join's rows grouped by value, and the join's rows
		// through an always-true Filter.
		counts []rec
		rows   []string
	}{
		{
			name: "inner",
			join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
				return l.Join(r, func(_ string, a, b string) string { return a + ":" + b })
			},
			counts: []rec{
				{"mugs:5", 1, 2, false},
				{"mugs:5", 0, 3, false}, {"cups:5", 1, 3, false},
				{"cups:5", 0, 4, false},
			},
			rows: []string{"p1=mugs:5@2", "p1=cups:5@3", "p1=<delete>@4"},
		},
		{
			name: "left",
			join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
				return l.LeftJoin(r, func(_ string, a, b string, ok bool) string { return a + ":" + opt(b, ok) })
			},
			counts: []rec{
				{"mugs:null", 1, 1, false},
				{"mugs:null", 0, 2, false}, {"mugs:5", 1, 2, false},
				{"mugs:5", 0, 3, false}, {"cups:5", 1, 3, false},
				{"cups:5", 0, 4, false}, {"cups:null", 1, 4, false},
				{"cups:null", 0, 5, false},
			},
			rows: []string{"p1=mugs:null@1", "p1=mugs:5@2", "p1=cups:5@3", "p1=cups:null@4", "p1=<delete>@5"},
		},
		{
			name: "outer",
			join: func(l, r topology.Table[string, string]) topology.Table[string, string] {
				return l.OuterJoin(r, func(_ string, a string, aok bool, b string, bok bool) string { return opt(a, aok) + ":" + opt(b, bok) })
			},
			counts: []rec{
				{"mugs:null", 1, 1, false},
				{"mugs:null", 0, 2, false}, {"mugs:5", 1, 2, false},
				{"mugs:5", 0, 3, false}, {"cups:5", 1, 3, false},
				{"cups:5", 0, 4, false}, {"cups:null", 1, 4, false},
				{"cups:null", 0, 5, false},
				{"null:7", 1, 6, false},
				{"null:7", 0, 7, false},
			},
			rows: []string{"p1=mugs:null@1", "p1=mugs:5@2", "p1=cups:5@3", "p1=cups:null@4", "p1=<delete>@5", "p1=null:7@6", "p1=<delete>@7"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			products := b.Table("products", serde.String(), serde.String(), topology.Named("products"))
			stock := b.Table("stock", serde.String(), serde.String(), topology.Named("stock"))
			j := c.join(products, stock)
			j.GroupBy(func(_ string, v string) (string, string) { return v, v }, serde.String(), serde.String(), topology.Named("by-row")).
				Count(topology.Named("row-counts")).ToStream().To("counts")
			j.Filter(func(string, string) bool { return true }).ToStream().WithSerdes(serde.String(), serde.String()).To("rows")
			d := newDriver(t, b)
			pin := tidemarktest.Input(d, "products", serde.String(), serde.String())
			sin := tidemarktest.Input(d, "stock", serde.String(), serde.String())
			must(t, pin.Pipe("p1", "mugs", 1))
			must(t, sin.Pipe("p1", "5", 2))
			must(t, pin.Pipe("p1", "cups", 3))
			must(t, sin.PipeTombstone("p1", 4))
			must(t, pin.PipeTombstone("p1", 5))
			must(t, sin.Pipe("p1", "7", 6))
			must(t, sin.PipeTombstone("p1", 7))

			var counts []rec
			for _, r := range readAll(t, tidemarktest.Output(d, "counts", serde.String(), serde.Int64())) {
				counts = append(counts, rec{r.Key, r.Value, r.Timestamp, r.Tombstone})
			}
			if !slices.Equal(counts, c.counts) {
				t.Errorf("counts of the join's rows:\n got %v\nwant %v", counts, c.counts)
			}
			var rows []string
			for _, r := range readAll(t, tidemarktest.Output(d, "rows", serde.String(), serde.String())) {
				v := r.Value
				if r.Tombstone {
					v = "<delete>"
				}
				rows = append(rows, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp))
			}
			if !slices.Equal(rows, c.rows) {
				t.Errorf("the join's rows through Filter:\n got %v\nwant %v", rows, c.rows)
			}
		})
	}
}

// A delete in the first of two chained table joins deletes the row of the
// second: KTableKTableInnerJoin forwards it (newValue null) since the right
// row exists, and the left join keeps the row unjoined.
func TestChainedTableJoinsPassDeletesOn(t *testing.T) {
	for _, c := range []struct {
		name string
		join func(ab, c topology.Table[string, string]) topology.Table[string, string]
		want []string
	}{
		{"inner", func(ab, c topology.Table[string, string]) topology.Table[string, string] {
			return ab.Join(c, func(_ string, x, y string) string { return x + "+" + y })
		}, []string{"k=a:b+c@3", "k=<delete>@4"}},
		{"left", func(ab, c topology.Table[string, string]) topology.Table[string, string] {
			return c.LeftJoin(ab, func(_ string, y, x string, ok bool) string { return y + "+" + opt(x, ok) })
		}, []string{"k=c+a:b@3", "k=c+null@4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			ta := b.Table("a", serde.String(), serde.String(), topology.Named("a"))
			tb := b.Table("b", serde.String(), serde.String(), topology.Named("b"))
			tc := b.Table("c", serde.String(), serde.String(), topology.Named("c"))
			ab := ta.Join(tb, func(_ string, x, y string) string { return x + ":" + y })
			c.join(ab, tc).ToStream().To("out")
			d := newDriver(t, b)
			must(t, tidemarktest.Input(d, "a", serde.String(), serde.String()).Pipe("k", "a", 1))
			must(t, tidemarktest.Input(d, "b", serde.String(), serde.String()).Pipe("k", "b", 2))
			tidemarktest.Output(d, "out", serde.String(), serde.String()).Discard()
			must(t, tidemarktest.Input(d, "c", serde.String(), serde.String()).Pipe("k", "c", 3))
			must(t, tidemarktest.Input(d, "b", serde.String(), serde.String()).PipeTombstone("k", 4))
			var got []string
			for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String())) {
				v := r.Value
				if r.Tombstone {
					v = "<delete>"
				}
				got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}
