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
			out := tidemarktest.Output(d, "counts", topology.WindowedSerde(serde.String()), serde.Int64())
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
	out := tidemarktest.Output(d, "counts", topology.WindowedSerde(serde.String()), serde.Int64())
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
