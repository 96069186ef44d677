package tidemarktest_test

import (
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestForeignKeyJoinRightChangesMatchKafkaStreams: Kafka Streams'
// ForeignTableJoinProcessorSupplier answers each subscription of a changed
// right row with the change's own timestamp (not the later of it and the
// left row), and answers a tombstone for a right key the table never held
// (its KTableSource forwards Change(null, null)) like a delete, so a left
// join writes its unjoined rows again. (Its inner join also writes a
// tombstone for l2 there, a row that never joined; tidemark sends
// tombstones only for rows that existed, as README says.)
func TestForeignKeyJoinRightChangesMatchKafkaStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		left bool
		want []string
	}{{
		name: "inner",
		want: []string{"l1=fk=p1;q=1*price=10@10", "l1=fk=p1;q=1*price=11@7", "l1=∅@40"},
	}, {
		name: "left",
		left: true,
		want: []string{"l1=fk=p1;q=1*price=10@10", "l1=fk=p1;q=1*price=11@7",
			"l2=fk=p2;q=1*none@20", "l2=fk=p2;q=1*none@25", "l1=∅@40"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := topology.NewBuilder("shop")
			fkJoin(b, tc.left).ToStream().To("joined")
			d := newDriver(t, b)
			ls := tidemarktest.Input(d, "lines", serde.String(), serde.String())
			ps := tidemarktest.Input(d, "products", serde.String(), serde.String())
			out := tidemarktest.Output(d, "joined", serde.String(), serde.String())
			must(t, ps.Pipe("p1", "price=10", 5))
			must(t, ls.Pipe("l1", "fk=p1;q=1", 10))
			must(t, ps.Pipe("p1", "price=11", 7)) // older than l1
			must(t, ls.Pipe("l2", "fk=p2;q=1", 20))
			must(t, ps.PipeTombstone("p2", 25)) // never held; l2 subscribes to it
			must(t, ls.PipeTombstone("l3", 30)) // never held
			must(t, ls.PipeTombstone("l1", 40))
			if got := changes(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("changes\n%v\nKafka Streams\n%v", got, tc.want)
			}
		})
	}
}
