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

// Kafka Streams' KTableAggregate: the subtractor runs only when the group
// has an aggregate; where it has none, the intermediate aggregate is null,
// the adder starts from initializer(), and a null result deletes the group's
// row and forwards a tombstone (Change(null, old)).

// byWarehouse groups items (key item, value warehouse) by warehouse.
func byWarehouse(item, warehouse string) (string, string) { return warehouse, item }

// changes renders a table's change stream: "key=value@ts", "key=∅@ts" for a
// tombstone.
func changes[V any](t *testing.T, out *tidemarktest.OutputTopic[string, V]) []string {
	t.Helper()
	var got []string
	for _, r := range readAll(t, out) {
		if r.Tombstone {
			got = append(got, fmt.Sprintf("%s=∅@%d", r.Key, r.Timestamp))
			continue
		}
		got = append(got, fmt.Sprintf("%s=%v@%d", r.Key, r.Value, r.Timestamp))
	}
	return got
}

// TestTableCountSubtractsNothingFromAMissingGroup: a row leaves a group
// whose count expired (WithTTL). Kafka Streams' KTableAggregate finds no
// aggregate, runs no subtractor and forwards a tombstone for the group;
// tidemark counted -1 from init() and kept a row of -1.
func TestTableCountSubtractsNothingFromAMissingGroup(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Table("items", serde.String(), serde.String(), topology.Named("items")).
		GroupBy(byWarehouse, serde.String(), serde.String()).
		Count(topology.Named("per-warehouse"), topology.WithTTL(100*time.Millisecond)).
		ToStream().To("counts")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "items", serde.String(), serde.String())
	out := tidemarktest.Output(d, "counts", serde.String(), serde.Int64())

	must(t, in.Pipe("i1", "A", 0))
	must(t, in.Pipe("i2", "B", 200)) // A's count (last updated at 0) expires
	if got, want := changes(t, out), []string{"A=1@0", "A=∅@200", "B=1@200"}; !slices.Equal(got, want) {
		t.Fatalf("before the move: changes %v, want %v", got, want)
	}
	must(t, in.Pipe("i1", "C", 210)) // i1 leaves A, which has no count
	if got, want := changes(t, out), []string{"A=∅@210", "C=1@210"}; !slices.Equal(got, want) {
		t.Errorf("moving i1 out of the expired group: changes %v, Kafka Streams %v", got, want)
	}
	if v, found, err := tidemarktest.Get(d, "per-warehouse", "A", serde.String(), serde.Int64()); err != nil || found {
		t.Errorf("group A after the move: %d, %v (err %v), want no row", v, found, err)
	}
}

type tally struct{ N int }

func (t *tally) String() string { return fmt.Sprintf("{%d}", t.N) }

// TestTableAggregateNullResultDeletesTheGroup: a subtractor returning nil
// (the group is empty) deletes the group's row and forwards a tombstone; the
// next row of that group is added to initializer(), as in Kafka Streams'
// KTableAggregate (getValueOrNull of a deleted row is null). tidemark kept a
// null row and passed it to the adder.
func TestTableAggregateNullResultDeletesTheGroup(t *testing.T) {
	b := topology.NewBuilder("app")
	add := func(_, _ string, a *tally) *tally {
		if a == nil {
			t.Errorf("adder called with a null aggregate, where Kafka Streams passes initializer()")
			return &tally{N: 1}
		}
		return &tally{N: a.N + 1}
	}
	sub := func(_, _ string, a *tally) *tally {
		if a.N == 1 {
			return nil
		}
		return &tally{N: a.N - 1}
	}
	b.Table("items", serde.String(), serde.String(), topology.Named("items")).
		GroupBy(byWarehouse, serde.String(), serde.String()).
		Aggregate(func() *tally { return &tally{} }, add, sub, serde.JSON[*tally](), topology.Named("per-warehouse")).
		ToStream().To("tallies")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "items", serde.String(), serde.String())
	out := tidemarktest.Output(d, "tallies", serde.String(), serde.JSON[*tally]())

	must(t, in.Pipe("i1", "A", 1))
	must(t, in.PipeTombstone("i1", 2)) // A's tally becomes null: deleted
	if v, found, err := tidemarktest.Get(d, "per-warehouse", "A", serde.String(), serde.JSON[*tally]()); err != nil || found {
		t.Errorf("group A after its null aggregate: %v, %v (err %v), want no row", v, found, err)
	}
	must(t, in.Pipe("i2", "A", 3))
	if got, want := changes(t, out), []string{"A={1}@1", "A=∅@2", "A={1}@3"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, Kafka Streams %v", got, want)
	}
}

// TestStreamAggregateNullResultDeletesTheKey: the same for a grouped
// stream (Kafka Streams' KStreamAggregate puts the null, which deletes the
// row; the next record starts from initializer()).
func TestStreamAggregateNullResultDeletesTheKey(t *testing.T) {
	b := topology.NewBuilder("app")
	add := resettingAdd(t)
	b.Stream("clicks", serde.String(), serde.String()).GroupByKey().
		Aggregate(func() *tally { return &tally{} }, add, serde.JSON[*tally](), topology.Named("tallies")).
		ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.JSON[*tally]())
	must(t, in.Pipe("a", "x", 1))
	must(t, in.Pipe("a", "reset", 2))
	if v, found, err := tidemarktest.Get(d, "tallies", "a", serde.String(), serde.JSON[*tally]()); err != nil || found {
		t.Errorf("key a after its null aggregate: %v, %v (err %v), want no row", v, found, err)
	}
	must(t, in.Pipe("a", "x", 3))
	if got, want := changes(t, out), []string{"a={1}@1", "a=∅@2", "a={1}@3"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, Kafka Streams %v", got, want)
	}
}

// TestWindowAggregateNullResultDeletesTheWindow: the same for a time
// window (Kafka Streams' KStreamWindowAggregate puts ValueAndTimestamp.make
// of the null, which is null: the window is deleted, Change(null, old) goes
// downstream, and the window's next record starts from initializer()).
func TestWindowAggregateNullResultDeletesTheWindow(t *testing.T) {
	b := topology.NewBuilder("app")
	add := resettingAdd(t)
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(10*time.Millisecond, time.Minute)).
		Aggregate(func() *tally { return &tally{} }, add, serde.JSON[*tally](), topology.Named("tallies")).
		ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", topology.TimeWindowedSerde(serde.String(), 10*time.Millisecond), serde.JSON[*tally]())
	for _, r := range []struct {
		v  string
		ts int64
	}{{"x", 1}, {"reset", 2}, {"x", 3}} {
		must(t, in.Pipe("a", r.v, r.ts))
	}
	var got []string
	for _, r := range readAll(t, out) {
		v := "∅"
		if !r.Tombstone {
			v = r.Value.String()
		}
		got = append(got, fmt.Sprintf("%s[%d,%d)=%s@%d", r.Key.Key, r.Key.Start, r.Key.End, v, r.Timestamp))
	}
	if want := []string{"a[0,10)={1}@1", "a[0,10)=∅@2", "a[0,10)={1}@3"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, Kafka Streams %v", got, want)
	}
}

// TestSessionAggregateNullResultDeletesTheSession: the same for a session
// (Kafka Streams' KStreamSessionWindowAggregate puts the null, which removes
// the session, and forwards Change(null, null); the key's next record finds
// no session and starts from initializer()).
func TestSessionAggregateNullResultDeletesTheSession(t *testing.T) {
	b := topology.NewBuilder("app")
	add := resettingAdd(t)
	merge := func(_ string, a, b *tally) *tally {
		if a == nil || b == nil {
			t.Errorf("merger called with a null aggregate (%v, %v)", a, b)
			return &tally{}
		}
		return &tally{N: a.N + b.N}
	}
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(10*time.Millisecond, time.Minute)).
		Aggregate(func() *tally { return &tally{} }, add, merge, serde.JSON[*tally](), topology.Named("sessions")).
		ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", topology.SessionWindowedSerde(serde.String()), serde.JSON[*tally]())
	for _, r := range []struct {
		v  string
		ts int64
	}{{"x", 1}, {"reset", 2}, {"x", 3}, {"reset", 3}} {
		must(t, in.Pipe("a", r.v, r.ts))
	}
	var got []string
	for _, r := range readAll(t, out) {
		v := "∅"
		if !r.Tombstone {
			v = r.Value.String()
		}
		got = append(got, fmt.Sprintf("%s[%d,%d]=%s@%d", r.Key.Key, r.Key.Start, r.Key.End, v, r.Timestamp))
	}
	// x@1 opens [1,1]; reset@2 merges it into [1,2] (a tombstone for
	// [1,1]) and deletes [1,2]; x@3 finds no session and opens [3,3]; reset@3
	// lands inside [3,3] and deletes it in place.
	want := []string{"a[1,1]={1}@1", "a[1,1]=∅@1", "a[1,2]=∅@2", "a[3,3]={1}@3", "a[3,3]=∅@3"}
	if !slices.Equal(got, want) {
		t.Errorf("changes %v, Kafka Streams %v", got, want)
	}
	held, err := tidemarktest.ReadSessions(d, "sessions", "a", serde.String(), serde.JSON[*tally]())
	must(t, err)
	if len(held) != 0 {
		t.Errorf("the store holds sessions %v of a, want none", held)
	}
}

// TestSlidingAggregateNullResultDeletesTheWindow: the same for sliding
// windows (Kafka Streams' KStreamSlidingWindowAggregate puts
// ValueAndTimestamp.make of the null, which deletes the window). With
// EmitFinal a deleted window has no final result: only [5,10] is emitted.
func TestSlidingAggregateNullResultDeletesTheWindow(t *testing.T) {
	b := topology.NewBuilder("app")
	add := func(_, v string, a *tally) *tally {
		if v == "reset" {
			return nil
		}
		return &tally{N: a.N + 1}
	}
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(5*time.Millisecond, 0)).
		Aggregate(func() *tally { return &tally{} }, add, serde.JSON[*tally](), topology.Named("sliding"), topology.EmitFinal()).
		ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", topology.TimeWindowedSerde(serde.String(), 5*time.Millisecond), serde.JSON[*tally]())
	// x@10 makes [5,10]={1}; reset@11 makes [6,11] and [11,16] null:
	// deleted. x@100 closes them all.
	for _, r := range []struct {
		v  string
		ts int64
	}{{"x", 10}, {"reset", 11}, {"x", 100}} {
		must(t, in.Pipe("a", r.v, r.ts))
	}
	var got []string
	for _, r := range readAll(t, out) {
		v := "∅"
		if !r.Tombstone {
			v = r.Value.String()
		}
		got = append(got, fmt.Sprintf("%s[%d,%d]=%s@%d", r.Key.Key, r.Key.Start, r.Key.End, v, r.Timestamp))
	}
	if want := []string{"a[5,10]={1}@10"}; !slices.Equal(got, want) {
		t.Errorf("final results %v, Kafka Streams %v", got, want)
	}
}

// resettingAdd counts a key's records and returns a null aggregate on
// value "reset"; it reports a call with a null aggregate, which Kafka
// Streams never makes (it passes initializer() instead).
func resettingAdd(t *testing.T) func(_, v string, a *tally) *tally {
	return func(_, v string, a *tally) *tally {
		if a == nil {
			t.Errorf("aggregator called with a null aggregate, where Kafka Streams passes initializer()")
			a = &tally{}
		}
		if v == "reset" {
			return nil
		}
		return &tally{N: a.N + 1}
	}
}
