package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// repartitionCount counts by key after a SelectKey, so the count reads a
// repartition topic; it returns the topology and that topic.
func repartitionCount(t *testing.T, app, in, out string) (*topology.Topology, string) {
	t.Helper()
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).
		SelectKey(func(k, _ string) string { return k }).
		GroupByKey(topology.Named("by-key")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt := topo.RepartitionTopics()
	if len(rt) != 1 {
		t.Fatalf("repartition topics %+v, want one", rt)
	}
	return topo, rt[0].Name
}

// startOffsets lists the log start offsets of topic's partitions (none
// while the topic does not exist).
func startOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo, err := kafkatest.Admin(t).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range lo[topic] {
		if o.Err == nil && p >= 0 {
			out[p] = o.Offset
		}
	}
	return out
}

// checkPurgedBelowCommitted fails if a partition's start offset passes the
// group's committed offset. The start offsets are read first: committed
// offsets only grow, so one read after them bounds what was committed when
// the records went.
func checkPurgedBelowCommitted(t *testing.T, group, topic string) (start, committed map[int32]int64) {
	t.Helper()
	start = startOffsets(t, topic)
	committed = committedOffsets(t, group, topic)
	for p, s := range start {
		if s > committed[p] {
			t.Fatalf("%s[%d] purged up to %d, past the committed offset %d", topic, p, s, committed[p])
		}
	}
	return start, committed
}

// TestRepartitionTopicsArePurgedBelowTheCommittedOffsets: with a short
// purge interval, the repartition topic's start offsets follow the group's
// committed offsets (never passing them) up to its end, the metric counts
// the records deleted, and the outputs are still exactly one count per
// input.
func TestRepartitionTopicsArePurgedBelowTheCommittedOffsets(t *testing.T) {
	t.Parallel()
	for _, g := range []processor.Guarantee{processor.ExactlyOnce, processor.AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) {
			in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
			app := kafkatest.UniqueName(t, "purge")
			topo, rep := repartitionCount(t, app, in, out)
			want := produceKeys(t, in, 0, 400, 10)
			a, _ := runApp(t, topo, processor.WithGuarantee(g), processor.WithHTTP("127.0.0.1:0"),
				processor.WithRepartitionPurgeInterval(200*time.Millisecond))

			done := make(chan struct{})
			go func() { defer close(done); checkCounts(t, out, want) }()
			// While the app runs, the purge never passes the committed offsets.
			for running := true; running; {
				select {
				case <-done:
					running = false
				case <-time.After(100 * time.Millisecond):
					checkPurgedBelowCommitted(t, app, rep)
				}
			}
			if t.Failed() {
				return
			}
			ends := endOffsets(t, rep)
			var start, committed map[int32]int64
			deadline := time.Now().Add(20 * time.Second)
			for {
				start, committed = checkPurgedBelowCommitted(t, app, rep)
				caught := len(start) == len(ends)
				for p, e := range ends {
					// The committed offset is the end, or the last record's
					// next offset when the end is a transaction marker.
					caught = caught && committed[p] >= e-1 && start[p] == committed[p]
				}
				if caught {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: start offsets %v, committed %v, end offsets %v: want the start at the committed offsets, at the end", rep, start, committed, ends)
				}
				time.Sleep(100 * time.Millisecond)
			}
			var sum int64
			for _, s := range start {
				sum += s
			}
			if sum == 0 {
				t.Fatalf("%s: nothing purged (end offsets %v)", rep, ends)
			}
			m := scrape(t, "http://"+a.HTTPAddr())
			if got := m["tidemark_repartition_purged_records_total"]; got != float64(sum) {
				t.Fatalf("tidemark_repartition_purged_records_total = %v, want %d (the start offsets, from 0)", got, sum)
			}
			t.Logf("%s: start offsets %v = committed %v, end offsets %v; %d records purged", rep, start, committed, ends, sum)
		})
	}
}

// TestRepartitionPurgeDisabled: a negative interval leaves the repartition
// topic whole.
func TestRepartitionPurgeDisabled(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	app := kafkatest.UniqueName(t, "nopurge")
	topo, rep := repartitionCount(t, app, in, out)
	want := produceKeys(t, in, 0, 200, 10)
	runApp(t, topo, processor.WithRepartitionPurgeInterval(-1))
	checkCounts(t, out, want)
	time.Sleep(time.Second) // five intervals of the purging test
	start := startOffsets(t, rep)
	if len(start) != 2 {
		t.Fatalf("%s: start offsets %v, want 2 partitions", rep, start)
	}
	for p, s := range start {
		if s != 0 {
			t.Fatalf("%s[%d] start offset %d with purging disabled, want 0", rep, p, s)
		}
	}
}
