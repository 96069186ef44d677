package tidemarktest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// sumOfWindowCounts re-groups a windowed count by its key and sums the
// counts with an adder and a subtractor, into "totals": a table
// aggregation downstream of a windowed one, which is right only if every
// update of a window carries the value it replaces (Kafka Streams enables
// old values on the windowed aggregation for it).
func sumOfWindowCounts(t *testing.T, windowed func(topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64]) (*tidemarktest.InputTopic[string, string], func() map[string]int64) {
	t.Helper()
	b := topology.NewBuilder("app")
	windowed(b.Stream("clicks", serde.String(), serde.String()).GroupByKey()).
		GroupBy(func(w topology.Windowed[string], n int64) (string, int64) { return w.Key, n }, serde.String(), serde.Int64(), topology.Named("by-user")).
		Aggregate(func() int64 { return 0 },
			func(_ string, n, sum int64) int64 { return sum + n },
			func(_ string, n, sum int64) int64 { return sum - n },
			serde.Int64(), topology.Named("totals")).
		ToStream().To("totals")
	d := newDriver(t, b)
	out := tidemarktest.Output(d, "totals", serde.String(), serde.Int64())
	latest := map[string]int64{}
	return tidemarktest.Input(d, "clicks", serde.String(), serde.String()), func() map[string]int64 {
		for _, r := range readAll(t, out) {
			latest[r.Key] = r.Value
		}
		return latest
	}
}

// A record inside an existing session changes that session in place: the
// update must carry the session's previous count, or a re-aggregation
// downstream adds the session twice.
func TestSessionUpdateInPlaceCarriesOldValue(t *testing.T) {
	in, totals := sumOfWindowCounts(t, func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(10*time.Second, time.Minute)).Count(topology.Named("sessions"))
	})
	for _, ts := range []int64{0, 5000, 2000, 5000} { // [0,0], then [0,5000], then 2000 and 5000 inside it
		must(t, in.Pipe("alice", "x", ts))
	}
	// One session [0,5000] of 4 records.
	if got := totals()["alice"]; got != 4 {
		t.Errorf("sum of alice's session counts = %d, want 4 (one session [0,5000] of 4 records)", got)
	}
}

// An out-of-order record updates sliding windows that already exist: each
// update must carry the window's previous count.
func TestSlidingUpdateCarriesOldValue(t *testing.T) {
	in, totals := sumOfWindowCounts(t, func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(10*time.Second, time.Minute)).Count(topology.Named("sliding"))
	})
	for _, ts := range []int64{10000, 15000, 12000} {
		must(t, in.Pipe("alice", "x", ts))
	}
	// Kafka Streams' windows after 10000, 15000, 12000 (difference 10s):
	// [0,10000]=1, [2000,12000]=2, [5000,15000]=3, [10001,20001]=2,
	// [12001,22001]=1.
	if got := totals()["alice"]; got != 9 {
		t.Errorf("sum of alice's sliding window counts = %d, want 9", got)
	}
}

// The same for tumbling windows, which already carry old values: a guard.
func TestTimeWindowUpdateCarriesOldValue(t *testing.T) {
	in, totals := sumOfWindowCounts(t, func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.WindowedBy(g, topology.HoppingWindows(10*time.Second, 5*time.Second, time.Minute)).Count(topology.Named("hopping"))
	})
	for _, ts := range []int64{1000, 7000, 3000} {
		must(t, in.Pipe("alice", "x", ts))
	}
	// [0,10000)=3, [5000,15000)=1.
	if got := totals()["alice"]; got != 4 {
		t.Errorf("sum of alice's hopping window counts = %d, want 4", got)
	}
}

// TestWindowedCountRegroupedCountsEveryWindow: a windowed count re-grouped
// by its key and counted counts the key's windows. Kafka Streams forwards
// init() (0) as the old value of each new window, and its KTableAggregate
// subtracts it from the group, which then stays at 1: a documented
// difference (README, "Tables come from topics"), kept because it would
// make the count wrong.
func TestWindowedCountRegroupedCountsEveryWindow(t *testing.T) {
	b := topology.NewBuilder("app")
	topology.WindowedBy(b.Stream("clicks", serde.String(), serde.String()).GroupByKey(),
		topology.TumblingWindows(10*time.Millisecond, time.Minute)).Count(topology.Named("per-window")).
		GroupBy(func(w topology.Windowed[string], n int64) (string, int64) { return w.Key, n }, serde.String(), serde.Int64(), topology.Named("by-user")).
		Count(topology.Named("windows")).
		ToStream().To("windows")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "windows", serde.String(), serde.Int64())
	for _, ts := range []int64{1, 12, 13, 25} { // windows [0,10), [10,20), [20,30)
		must(t, in.Pipe("alice", "x", ts))
	}
	var got []int64
	for _, r := range readAll(t, out) {
		got = append(got, r.Value)
	}
	if want := []int64{1, 2, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("alice's window counts %v, want %v", got, want)
	}
}
