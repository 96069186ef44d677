package tidemarktest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestSlidingWindowUpdatesMatchKafkaStreams pipes records one at a time
// into a sliding count (difference 10s, grace 1 min) and compares the
// updates each record causes with those of Kafka Streams'
// KStreamSlidingWindowAggregate (traced by hand from its processInOrder
// and createWindows), compared as sets per input record: Kafka Streams
// forwards them in another order than by window start.
func TestSlidingWindowUpdatesMatchKafkaStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []int64
		want [][]string // per record: "[start,end]=count@ts"
	}{{
		name: "in order",
		ts:   []int64{10000, 15000, 30000},
		want: [][]string{
			{"[0,10000]=1@10000"},
			{"[5000,15000]=2@15000", "[10001,20001]=1@15000"},
			{"[20000,30000]=1@30000"},
		},
	}, {
		// The third record's right window [10001,20001] exists already
		// (created by 15000) and does not hold it: Kafka Streams finds it
		// (rightWinAlreadyCreated) and forwards nothing for it.
		name: "a repeated timestamp leaves its right window alone",
		ts:   []int64{10000, 15000, 10000},
		want: [][]string{
			{"[0,10000]=1@10000"},
			{"[5000,15000]=2@15000", "[10001,20001]=1@15000"},
			{"[0,10000]=2@10000", "[5000,15000]=3@15000"},
		},
	}, {
		// Out of order: 12000 creates its own right window [12001,22001]
		// from the later record 15000.
		name: "out of order creates the record's right window",
		ts:   []int64{10000, 15000, 12000},
		want: [][]string{
			{"[0,10000]=1@10000"},
			{"[5000,15000]=2@15000", "[10001,20001]=1@15000"},
			{"[2000,12000]=2@12000", "[5000,15000]=3@15000", "[10001,20001]=2@15000", "[12001,22001]=1@15000"},
		},
	}, {
		// 12000 again: its right window [12001,22001] exists; only the
		// windows holding 12000 change.
		name: "a repeated out-of-order timestamp",
		ts:   []int64{10000, 15000, 12000, 12000},
		want: [][]string{
			{"[0,10000]=1@10000"},
			{"[5000,15000]=2@15000", "[10001,20001]=1@15000"},
			{"[2000,12000]=2@12000", "[5000,15000]=3@15000", "[10001,20001]=2@15000", "[12001,22001]=1@15000"},
			{"[2000,12000]=3@12000", "[5000,15000]=4@15000", "[10001,20001]=3@15000"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
			topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(10*time.Second, time.Minute)).
				Count(topology.Named("sliding")).ToStream().To("counts")
			d := newDriver(t, b)
			in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
			out := tidemarktest.Output(d, "counts", topology.TimeWindowedSerde(serde.String(), 10*time.Second), serde.Int64())
			for i, ts := range tc.ts {
				must(t, in.Pipe("alice", "x", ts))
				var got []string
				for _, r := range readAll(t, out) {
					got = append(got, fmt.Sprintf("[%d,%d]=%d@%d", r.Key.Start, r.Key.End, r.Value, r.Timestamp))
				}
				slices.Sort(got)
				want := slices.Clone(tc.want[i])
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("record %d (@%d): updates %v, want %v", i, ts, got, want)
				}
			}
		})
	}
}

// TestSlidingWindowsOfZeroDifference: Kafka Streams accepts a time
// difference of 0 (SlidingWindows rejects only a negative one): windows
// [t, t] that group the records of equal timestamps. Traced from
// KStreamSlidingWindowAggregate: 10, 11, 10, 12 give [10,10]=1, [11,11]=1,
// [10,10]=2, [12,12]=1.
func TestSlidingWindowsOfZeroDifference(t *testing.T) {
	b := topology.NewBuilder("app")
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(0, time.Minute)).
		Count(topology.Named("sliding")).ToStream().To("counts")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	out := tidemarktest.Output(d, "counts", topology.TimeWindowedSerde(serde.String(), 0), serde.Int64())
	var got []string
	for _, ts := range []int64{10, 11, 10, 12} {
		must(t, in.Pipe("alice", "x", ts))
		for _, r := range readAll(t, out) {
			got = append(got, fmt.Sprintf("[%d,%d]=%d@%d", r.Key.Start, r.Key.End, r.Value, r.Timestamp))
		}
	}
	want := []string{"[10,10]=1@10", "[11,11]=1@11", "[10,10]=2@10", "[12,12]=1@12"}
	if !slices.Equal(got, want) {
		t.Errorf("updates %v, want %v", got, want)
	}
}

// kafkaSliding is a port of Kafka Streams' KStreamSlidingWindowAggregate
// (processInOrder, createWindows, updateWindowAndForward) for a count of
// one key, without expiry: the reference of
// TestSlidingWindowsMatchKafkaStreamsPort. Records earlier than d take
// processEarly (processEarlyRecord).
type kafkaSliding struct {
	d, grace, observed int64
	wins               map[int64][2]int64 // start → {count, max timestamp}
}

func (k *kafkaSliding) process(ts int64) []string {
	var out []string
	k.observed = max(k.observed, ts)
	closeTime := k.observed - k.grace
	if ts+k.d < closeTime {
		return nil
	}
	if ts < k.d {
		return k.processEarlyRecord(ts, closeTime)
	}
	update := func(start int64, agg [2]int64, fresh bool) {
		if start+k.d < closeTime {
			return
		}
		newTS := ts
		if !fresh {
			newTS = max(ts, agg[1])
		}
		agg = [2]int64{agg[0] + 1, newTS}
		k.wins[start] = agg
		out = append(out, fmt.Sprintf("[%d,%d]=%d@%d", start, start+k.d, agg[0], agg[1]))
	}
	var starts []int64
	for s := range k.wins {
		if s >= max(0, ts-2*k.d) && s <= ts+1 {
			starts = append(starts, s)
		}
	}
	slices.Sort(starts)
	seen := map[int64]bool{}
	var leftAgg, rightAgg *[2]int64
	leftDone, rightDone := false, false
	var prev *int64
	for _, s := range starts {
		w := k.wins[s]
		seen[s] = true
		end := s + k.d
		switch {
		case end < ts:
			w := w
			leftAgg, prev = &w, &w[1]
		case end == ts:
			leftDone = true
			if w[1] < ts {
				p := w[1]
				prev = &p
			}
			update(s, w, false)
		case end > ts && s <= ts:
			w := w
			rightAgg = &w
			update(s, w, false)
		case s == ts+1:
			rightDone = true
		}
	}
	if prev != nil && !seen[*prev+1] && *prev+1+k.d >= ts {
		update(*prev+1, [2]int64{0, ts}, true)
	}
	if !leftDone {
		agg := [2]int64{0, ts}
		if prev != nil && ts-k.d <= *prev {
			agg = [2]int64{leftAgg[0], ts}
		}
		update(ts-k.d, agg, false)
	}
	if !rightDone && rightAgg != nil && rightAgg[1] > ts {
		k.wins[ts+1] = *rightAgg
		out = append(out, fmt.Sprintf("[%d,%d]=%d@%d", ts+1, ts+1+k.d, rightAgg[0], rightAgg[1]))
	}
	slices.Sort(out)
	// A record d+1 after the previous one creates that record's right
	// window and its own left window, the same window [ts−d, ts], and
	// Kafka Streams forwards it twice with the same value: one update.
	return slices.Compact(out)
}

// processEarlyRecord ports processEarly: a record at ts < d goes into the
// combined window [0, d], into the windows starting in (0, ts], and into its
// own right window and the previous record's if they are missing.
func (k *kafkaSliding) processEarlyRecord(ts, closeTime int64) []string {
	var out []string
	update := func(start int64, agg [2]int64, fresh bool) {
		if start+k.d < closeTime {
			return
		}
		newTS := ts
		if !fresh {
			newTS = max(ts, agg[1])
		}
		agg = [2]int64{agg[0] + 1, newTS}
		k.wins[start] = agg
		out = append(out, fmt.Sprintf("[%d,%d]=%d@%d", start, start+k.d, agg[0], agg[1]))
	}
	var starts []int64
	for s := range k.wins {
		if s >= 0 && s <= ts+1 {
			starts = append(starts, s)
		}
	}
	slices.Sort(starts)
	seen := map[int64]bool{}
	var combined, rightAgg *[2]int64
	rightDone := false
	var prev *int64
	for _, s := range starts {
		w := k.wins[s]
		seen[s] = true
		switch {
		case s == 0:
			combined = &w
			if w[1] < ts {
				p := w[1]
				prev = &p
			}
		case s <= ts:
			rightAgg = &w
			update(s, w, false)
		case s == ts+1:
			rightDone = true
		}
	}
	if rightAgg == nil && combined != nil && combined[1] > ts {
		rightAgg = combined
	}
	if !rightDone && rightAgg != nil && rightAgg[1] > ts {
		k.wins[ts+1] = *rightAgg
		out = append(out, fmt.Sprintf("[%d,%d]=%d@%d", ts+1, ts+1+k.d, rightAgg[0], rightAgg[1]))
	}
	if prev != nil && !seen[*prev+1] {
		update(*prev+1, [2]int64{0, ts}, true)
	}
	if combined == nil {
		update(0, [2]int64{0, ts}, true)
	} else {
		update(0, *combined, false)
	}
	slices.Sort(out)
	return out
}

// TestSlidingWindowsMatchKafkaStreamsPort compares a sliding count with
// the port of Kafka Streams' algorithm on random out-of-order input with
// repeated timestamps, update by update (as sets per input record). The
// grace outlasts the input: with closed windows Kafka Streams' windows can
// miss records (a closed left window it never created), which tidemark,
// recomputing from the records, does not.
func TestSlidingWindowsMatchKafkaStreamsPort(t *testing.T) {
	seed := randomSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	const d = 10
	for round := range 20 {
		b := topology.NewBuilder("app")
		g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
		topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(d*time.Millisecond, time.Hour)).
			Count(topology.Named("sliding")).ToStream().To("counts")
		dr := newDriver(t, b)
		in := tidemarktest.Input(dr, "clicks", serde.String(), serde.String())
		out := tidemarktest.Output(dr, "counts", topology.TimeWindowedSerde(serde.String(), time.Duration(d)*time.Millisecond), serde.Int64())
		ref := &kafkaSliding{d: d, grace: 3_600_000, observed: -1, wins: map[int64][2]int64{}}
		var tss []int64
		for i := range 40 {
			ts := rng.Int64N(d + 60) // a sixth earlier than d: processEarly
			tss = append(tss, ts)
			must(t, in.Pipe("alice", "x", ts))
			var got []string
			for _, r := range readAll(t, out) {
				got = append(got, fmt.Sprintf("[%d,%d]=%d@%d", r.Key.Start, r.Key.End, r.Value, r.Timestamp))
			}
			slices.Sort(got)
			if want := ref.process(ts); !slices.Equal(got, want) {
				t.Fatalf("round %d, record %d (timestamps %v): updates %v, Kafka Streams %v", round, i, tss, got, want)
			}
		}
	}
}
