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

// TestSlidingWindowsEarlyRecordsMatchKafkaStreams: records earlier than the
// time difference d go, as in Kafka Streams' processEarly, into the window
// [0, d] (never one with a negative start), and get the right windows every
// record gets. Difference 10 ms, grace 1 min; the updates of each record
// traced by hand from KStreamSlidingWindowAggregate (processEarly for
// records < 10, processInOrder and createWindows for the others), compared
// as sets per input record, and read back through the TimeWindowedSerde
// Kafka Streams' consumers use.
func TestSlidingWindowsEarlyRecordsMatchKafkaStreams(t *testing.T) {
	b := topology.NewBuilder("app")
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(10*time.Millisecond, time.Minute)).
		Count(topology.Named("sliding")).ToStream().To("counts")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "counts", topology.TimeWindowedSerde(serde.String(), 10*time.Millisecond), serde.Int64())
	for i, step := range []struct {
		ts   int64
		want []string // "[start,end]=count@timestamp"
	}{
		// No window yet: the combined window [0,10] is created.
		{5, []string{"[0,10]=1@5"}},
		// Out of order, early: 2's right window [3,13] takes the combined
		// window's aggregate (its records after 2), then [0,10] holds 2.
		{2, []string{"[3,13]=1@5", "[0,10]=2@5"}},
		// Exactly d: its left window is the combined window; 2's right
		// window holds it; 5's right window [6,16] is created.
		{10, []string{"[0,10]=3@10", "[3,13]=2@10", "[6,16]=1@10"}},
		// Early and out of order: the right windows of 2 and 5 hold it,
		// its own right window [9,19] is created from [6,16]'s aggregate.
		{8, []string{"[3,13]=3@10", "[6,16]=2@10", "[9,19]=1@10", "[0,10]=4@10"}},
		// After d: its left window [3,13] is 2's right window.
		{13, []string{"[3,13]=4@13", "[6,16]=3@13", "[9,19]=2@13", "[11,21]=1@13"}},
		// Early, before every record: its right window [2,12] takes the
		// combined window's aggregate (13 is not in it).
		{1, []string{"[2,12]=4@10", "[0,10]=5@10"}},
		{25, []string{"[15,25]=1@25"}},
	} {
		must(t, in.Pipe("alice", "x", step.ts))
		var got []string
		for _, r := range readAll(t, out) {
			got = append(got, fmt.Sprintf("[%d,%d]=%d@%d", r.Key.Start, r.Key.End, r.Value, r.Timestamp))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(step.want))
		if !slices.Equal(got, want) {
			t.Errorf("record %d (@%d): updates %v, Kafka Streams %v", i, step.ts, got, want)
		}
	}
}
