package tidemarktest_test

import (
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// countClicks builds clicks -> count(grouped by key) -> out, the scenario
// of every windowing golden test, and returns its transcript and input.
func countClicks(t *testing.T, out string, keys serde.Serde[topology.Windowed[string]], count func(topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64]) (*transcript, *tidemarktest.InputTopic[string, string]) {
	b := topology.NewBuilder("app")
	count(b.Stream("clicks", serde.String(), serde.String()).GroupByKey()).ToStream().To(out)
	tr := goldenRun(t, b, out, keys, serde.Int64())
	return tr, tidemarktest.Input(tr.d, "clicks", serde.String(), serde.String())
}

// windowedCount builds clicks -> windowed count -> counts.
func windowedCount(t *testing.T, w topology.TimeWindows, opts ...topology.WindowOption) (*transcript, *tidemarktest.InputTopic[string, string]) {
	return countClicks(t, "counts", topology.TimeWindowedSerde(serde.String(), 10*time.Second), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.WindowedBy(g, w).Count(append(opts, topology.Named("clicks-per-window"))...)
	})
}

func TestGoldenTumblingWindowBoundaries(t *testing.T) {
	tr, in := windowedCount(t, topology.TumblingWindows(10*time.Second, 0))
	tr.note("tumbling 10s windows are [start, start+10s): 9999 is in [0,10000), 10000 starts the next")
	pipe(tr, in, "clicks", "alice", "a", 0)
	pipe(tr, in, "clicks", "alice", "b", 9999)
	pipe(tr, in, "clicks", "alice", "c", 10000)
	pipe(tr, in, "clicks", "bob", "d", 19999)
	pipe(tr, in, "clicks", "alice", "e", 25000)
	tr.note("with no grace, [10000,20000) closed when stream time reached 20000+: a record for it is dropped")
	pipe(tr, in, "clicks", "alice", "late", 15000)
	tr.check()
}

func TestGoldenHoppingWindowsAreEpochAligned(t *testing.T) {
	tr, in := windowedCount(t, topology.HoppingWindows(10*time.Second, 5*time.Second, time.Minute))
	tr.note("size 10s advancing 5s: a record belongs to the two windows whose aligned start is in (ts-10s, ts]")
	pipe(tr, in, "clicks", "alice", "a", 7000)
	pipe(tr, in, "clicks", "alice", "b", 3000)
	pipe(tr, in, "clicks", "alice", "c", 10000)
	pipe(tr, in, "clicks", "alice", "d", 14999)
	tr.check()
}

func TestGoldenGraceDropsLateRecords(t *testing.T) {
	tr, in := windowedCount(t, topology.TumblingWindows(10*time.Second, 5*time.Second))
	tr.note("window [0,10000) with 5s grace accepts records until stream time reaches 15000")
	pipe(tr, in, "clicks", "alice", "a", 1000)
	pipe(tr, in, "clicks", "alice", "b", 14999)
	pipe(tr, in, "clicks", "alice", "late-but-in-grace", 2000)
	pipe(tr, in, "clicks", "bob", "c", 15000)
	pipe(tr, in, "clicks", "alice", "too-late", 3000)
	tr.note("lateness is per window: the record is dropped only from windows that closed")
	pipe(tr, in, "clicks", "alice", "on-time", 16000)
	tr.check()
}

func TestGoldenEmitFinalWaitsForWindowEndPlusGrace(t *testing.T) {
	tr, in := windowedCount(t, topology.TumblingWindows(10*time.Second, 2*time.Second), topology.EmitFinal())
	tr.note("emit final: nothing until stream time reaches window end + grace, then one result per window")
	pipe(tr, in, "clicks", "alice", "a", 1000)
	pipe(tr, in, "clicks", "alice", "b", 9000)
	pipe(tr, in, "clicks", "bob", "c", 10500)
	pipe(tr, in, "clicks", "alice", "d", 11999)
	pipe(tr, in, "clicks", "alice", "e", 12000)
	pipe(tr, in, "clicks", "bob", "f", 35000)
	tr.check()
}

func TestGoldenAggregationTimestampIsMaxOfInputs(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("amounts", serde.String(), serde.Int64()).GroupByKey().
		Aggregate(func() int64 { return 0 }, func(_ string, v, agg int64) int64 { return agg + v }, serde.Int64(), topology.Named("sums")).
		ToStream().To("sums")
	tr := goldenRun(t, b, "sums", serde.String(), serde.Int64())
	in := tidemarktest.Input(tr.d, "amounts", serde.String(), serde.Int64())
	tr.note("an update's timestamp is the largest timestamp aggregated so far, even when records arrive out of order")
	pipe(tr, in, "amounts", "sku-1", 5, 1000)
	pipe(tr, in, "amounts", "sku-1", 7, 500)
	pipe(tr, in, "amounts", "sku-1", 1, 3000)
	pipe(tr, in, "amounts", "sku-2", 2, 200)
	tr.check()
}

func TestGoldenSessionMerges(t *testing.T) {
	tr, in := countClicks(t, "sessions", topology.SessionWindowedSerde(serde.String()), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, 10*time.Second)).Count(topology.Named("sessions"))
	})
	tr.note("gap 5s: records within 5s of a session join it; a replaced session is deleted (tombstone)")
	pipe(tr, in, "clicks", "alice", "a", 0)
	pipe(tr, in, "clicks", "alice", "b", 3000)
	pipe(tr, in, "clicks", "alice", "c", 20000)
	pipe(tr, in, "clicks", "alice", "d", 10000)
	pipe(tr, in, "clicks", "alice", "e", 14000)
	tr.note("17000 is within 5s of both [10000,14000] and [20000,20000]: the three merge")
	pipe(tr, in, "clicks", "alice", "f", 17000)
	tr.note("stream time 30000, grace 10s: a session ending before 20000 can no longer grow")
	pipe(tr, in, "clicks", "bob", "g", 30000)
	pipe(tr, in, "clicks", "alice", "late", 1000)
	tr.check()
	got, err := tidemarktest.ReadSessions(tr.d, "sessions", "alice", serde.String(), serde.Int64())
	must(t, err)
	// Sessions are kept for gap + grace after they end: at stream time
	// 30000, [0,3000] has expired and [10000,20000] has not.
	if len(got) != 1 || got[0].Start != 10000 || got[0].End != 20000 || got[0].Value != 4 {
		t.Errorf("alice's sessions in the store = %+v, want only [10000,20000]=4", got)
	}
}

func TestGoldenSessionAcceptsRecordsWithinGapPastGrace(t *testing.T) {
	tr, in := countClicks(t, "sessions", topology.SessionWindowedSerde(serde.String()), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(10*time.Second, 0)).Count(topology.Named("sessions"))
	})
	tr.note("gap 10s, no grace: a record is late only if its merged session ends before stream time - grace - gap (Kafka Streams since 3.0)")
	pipe(tr, in, "clicks", "alice", "a", 0)
	pipe(tr, in, "clicks", "bob", "b", 6000)
	tr.note("stream time 6000: 3000 is behind it, and merges into alice's [0,0], which a record up to 10000 could still extend")
	pipe(tr, in, "clicks", "alice", "c", 3000)
	pipe(tr, in, "clicks", "carol", "d", 5000)
	pipe(tr, in, "clicks", "bob", "e", 14000)
	tr.note("stream time 14000: alice's [0,3000] is closed (3000 + 10000 < 14000); 12000 starts a session of its own")
	pipe(tr, in, "clicks", "alice", "f", 12000)
	pipe(tr, in, "clicks", "bob", "g", 30000)
	tr.note("stream time 30000: a session ending at 15000 could not reach 20000, so the record is dropped")
	pipe(tr, in, "clicks", "alice", "late", 15000)
	tr.check()
	if got := tr.d.Metrics().Dropped[topology.DropLate]; got != 1 {
		t.Errorf("dropped as late: %d, want 1 (only the last record)", got)
	}
}

func TestGoldenSessionNeverReopensAClosedSession(t *testing.T) {
	tr, in := countClicks(t, "sessions", topology.SessionWindowedSerde(serde.String()), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(10*time.Second, 0)).
			Count(topology.Named("sessions"), topology.EmitFinal(), topology.WithRetention(time.Minute))
	})
	tr.note("gap 10s, no grace, kept a minute for queries: [0,0] is final once stream time passes 10000")
	pipe(tr, in, "clicks", "alice", "a", 0)
	pipe(tr, in, "clicks", "bob", "b", 15000)
	tr.note("8000 is within gap of the closed [0,0], which the store still holds: it starts a session of its own")
	pipe(tr, in, "clicks", "alice", "c", 8000)
	pipe(tr, in, "clicks", "bob", "d", 40000)
	tr.check()
}

func TestGoldenSlidingWindows(t *testing.T) {
	tr, in := countClicks(t, "counts", topology.TimeWindowedSerde(serde.String(), 10*time.Second), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(10*time.Second, 5*time.Second)).Count(topology.Named("sliding"))
	})
	tr.note("difference 10s, inclusive bounds: each record has a left window [t-10s, t]; a later record within 10001ms creates the earlier one's right window [t+1, t+10001]")
	pipe(tr, in, "clicks", "alice", "a", 10000)
	pipe(tr, in, "clicks", "alice", "b", 15000)
	pipe(tr, in, "clicks", "alice", "c", 30000)
	tr.note("out of order, within grace: updates the windows that now contain it")
	pipe(tr, in, "clicks", "alice", "d", 25000)
	tr.note("stream time 30000, grace 5s: the latest window holding 14000 ends at 24000, and 24000+5s < 30000: dropped")
	pipe(tr, in, "clicks", "alice", "late", 14000)
	tr.check()
}

func TestGoldenSessionEmitFinal(t *testing.T) {
	tr, in := countClicks(t, "sessions", topology.SessionWindowedSerde(serde.String()), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, 2*time.Second)).
			Count(topology.Named("sessions"), topology.EmitFinal())
	})
	tr.note("gap 5s, grace 2s: a session is final once end + gap <= stream time - grace; merges emit nothing")
	pipe(tr, in, "clicks", "alice", "a", 0)
	pipe(tr, in, "clicks", "alice", "b", 4000)
	pipe(tr, in, "clicks", "bob", "c", 9000)
	tr.note("stream time 10999: [0,4000] could still be extended by a record at 9000 (within grace); at 11000 it would be final")
	pipe(tr, in, "clicks", "bob", "d", 10999)
	pipe(tr, in, "clicks", "alice", "e", 9000)
	pipe(tr, in, "clicks", "bob", "f", 16001)
	pipe(tr, in, "clicks", "bob", "g", 30000)
	tr.check()
}

func TestGoldenSlidingEmitFinal(t *testing.T) {
	tr, in := countClicks(t, "counts", topology.TimeWindowedSerde(serde.String(), 10*time.Second), func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
		return topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(10*time.Second, 0)).
			Count(topology.Named("sliding"), topology.EmitFinal())
	})
	tr.note("difference 10s, no grace: [s, s+10s] is final once stream time > s+10s")
	pipe(tr, in, "clicks", "alice", "a", 10000)
	pipe(tr, in, "clicks", "alice", "b", 15000)
	pipe(tr, in, "clicks", "alice", "c", 20000)
	pipe(tr, in, "clicks", "alice", "d", 20001)
	pipe(tr, in, "clicks", "alice", "e", 40000)
	tr.check()
}

// TestWindowsClosedCountsFinalResults: the runtime commits early when
// final results are pending, so the task must count them as they go out.
func TestWindowsClosedCountsFinalResults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		final bool
		want  int64
	}{
		{"emit final counts each closed window once", true, 3},
		{"emit on update counts none", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []topology.WindowOption{topology.Named("per-window")}
			if tc.final {
				opts = append(opts, topology.EmitFinal())
			}
			b := topology.NewBuilder("app")
			g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
			topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 0)).Count(opts...).ToStream().To("counts")
			d := newDriver(t, b)
			in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
			for _, ts := range []int64{1000, 2000, 11000, 21000, 35000} {
				if err := in.Pipe("alice", "x", ts); err != nil {
					t.Fatal(err)
				}
			}
			// At stream time 35000, windows [0,10s), [10s,20s) and [20s,30s) closed.
			if got := d.Metrics().WindowsClosed; got != tc.want {
				t.Fatalf("WindowsClosed = %d, want %d", got, tc.want)
			}
		})
	}
}
