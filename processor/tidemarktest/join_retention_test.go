package tidemarktest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Each input's join store keeps records by that input's own clock, as
// Kafka Streams' join window stores do (each store expires by the largest
// timestamp put into it, not by the join's shared stream time). Input
// that runs ahead on one side must not expire the other side's records:
// found by `bench parity` on the real broker, where tidemark missed 190 of
// Kafka Streams' 33,546 pairs.
func TestStreamJoinStoresExpireByTheirOwnInput(t *testing.T) {
	for _, kind := range []string{"inner", "left", "outer"} {
		t.Run(kind, func(t *testing.T) {
			b := topology.NewBuilder("app")
			l := b.Stream("left", serde.String(), serde.String())
			r := b.Stream("right", serde.String(), serde.String())
			// ±1s, 500ms grace: the stores keep 2.5s.
			w := topology.JoinWindowsOf(time.Second, 500*time.Millisecond)
			var out topology.Stream[string, string]
			switch kind {
			case "inner":
				out = l.Join(r, func(_ string, a, b string) string { return a + "+" + b }, w, topology.Named("j"))
			case "left":
				out = l.LeftJoin(r, func(_ string, a, b string, ok bool) string { return a + "+" + opt(b, ok) }, w, topology.Named("j"))
			default:
				out = l.OuterJoin(r, func(_ string, a string, lok bool, b string, rok bool) string { return opt(a, lok) + "+" + opt(b, rok) }, w, topology.Named("j"))
			}
			out.To("out")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			d, err := tidemarktest.New(topo)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			lin := tidemarktest.Input(d, "left", serde.String(), serde.String())
			rin := tidemarktest.Input(d, "right", serde.String(), serde.String())
			pipe := func(in *tidemarktest.InputTopic[string, string], k, v string, ts int64) {
				t.Helper()
				if err := in.Pipe(k, v, ts); err != nil {
					t.Fatal(err)
				}
			}
			pipe(lin, "a", "l1", 1000)
			// The right input runs ahead: stream time 10000, but the left
			// store's own clock is still 1000, and it keeps l1.
			pipe(rin, "b", "r-ahead", 10000)
			// Late on the right (by the join's stream time), within 1s of l1:
			// Kafka Streams joins it with l1 from the left store.
			pipe(rin, "a", "r1", 1500)
			// The mirror: the left input catches up past the right store's
			// clock, and a right record behind the left's clock but within
			// the right's retention joins a late left record.
			pipe(rin, "c", "r2", 9000)
			pipe(lin, "x", "l-ahead", 20000)
			pipe(lin, "c", "l2", 8800)
			outs, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range outs {
				if o.Value == "l1+r1" || o.Value == "l2+r2" {
					got = append(got, fmt.Sprintf("%s|%s|%d", o.Key, o.Value, o.Timestamp))
				}
			}
			slices.Sort(got)
			want := []string{"a|l1+r1|1500", "c|l2+r2|9000"}
			if !slices.Equal(got, want) {
				t.Fatalf("joined pairs %v, want %v (Kafka Streams' result); all outputs: %v", got, want, outs)
			}
		})
	}
}
