package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestCaughtUpTransactionalInputHasNoLag: the records a fetch leaves
// behind on a transactionally written input (its commit marker, aborted
// records) are never delivered. Once the loop has polled for lagSettle
// without being given any, the partition's lag is 0, so an idle
// application reports no lag and its thread no stall. Until then, while
// records are queued, and while the partition is paused, they count.
func TestCaughtUpTransactionalInputHasNoLag(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 500, 100, 2, frontier.Options{})
	tp0 := changelog.TopicPartition{Topic: "in", Partition: 0}
	t0 := r.now
	// in/0: offsets 0..4, then a commit marker at 5 (high watermark 6);
	// in/1: offsets 0..2, then an aborted transaction of 10 records and its
	// marker (high watermark 14).
	recs := func(p int32, n int) []*kgo.Record {
		var out []*kgo.Record
		for o := range n {
			out = append(out, &kgo.Record{Topic: "in", Partition: p, Offset: int64(o), Key: []byte("k"),
				Value: []byte(fmt.Sprint(o)), Timestamp: time.UnixMilli(int64(o))})
		}
		return out
	}
	r.s.fair.polled = t0
	r.s.fair.enqueue(topology.TaskID{Partition: 0}, tp0, recs(0, 5), 6-4-1, t0)
	r.s.fair.enqueue(topology.TaskID{Partition: 1}, changelog.TopicPartition{Topic: "in", Partition: 1}, recs(1, 3), 14-2-1, t0)
	r.s.observeQueues(t0)
	if got := metricValue(r.s.app.metrics.lag); got != 8+12 {
		t.Fatalf("queued: lag %v, want 20 (8 queued, 1+11 behind)", got)
	}
	r.pass(t)
	r.s.observeQueues(t0)
	if got := metricValue(r.s.app.metrics.lag); got != 12 {
		t.Fatalf("just processed: lag %v, want the 1+11 behind the last fetches", got)
	}
	if !r.s.fair.settling() {
		t.Fatal("not settling with 12 behind and nothing queued")
	}

	// Polled since, but not yet for lagSettle: still counted.
	r.s.fair.polled = t0.Add(lagSettle - time.Millisecond)
	r.s.observeQueues(r.s.fair.polled)
	if got := metricValue(r.s.app.metrics.lag); got != 12 {
		t.Fatalf("%s after the fetch: lag %v, want 12", lagSettle-time.Millisecond, got)
	}
	// The loop did not poll for lagSettle (a transaction's end in flight):
	// what it might have been given is still lag.
	r.s.observeQueues(t0.Add(time.Minute))
	if got := metricValue(r.s.app.metrics.lag); got != 12 {
		t.Fatalf("no poll for lagSettle: lag %v, want 12", got)
	}
	// A paused partition is not being fetched: its lag stands.
	r.s.fair.paused[tp0] = pauseBacklog
	r.s.fair.polled = t0.Add(lagSettle)
	r.s.observeQueues(r.s.fair.polled)
	if got := metricValue(r.s.app.metrics.lag); got != 1 {
		t.Fatalf("polled for lagSettle, in/0 paused: lag %v, want in/0's 1", got)
	}
	delete(r.s.fair.paused, tp0)
	r.s.observeQueues(r.s.fair.polled)
	if got := metricValue(r.s.app.metrics.lag); got != 0 {
		t.Fatalf("polled for lagSettle with nothing delivered: lag %v, want 0", got)
	}
	if r.s.fair.settling() {
		t.Fatal("still settling after the lag settled")
	}
	if got := metricValue(r.s.app.threadMetrics().lag.WithLabelValues("0")); got != 0 {
		t.Fatalf("thread lag %v, want 0", got)
	}
	if st := r.s.stallState(r.s.fair.polled); st != nil {
		t.Fatalf("a caught-up thread has work: %v", st)
	}

	// New records are counted again, with what their fetch leaves behind.
	later := t0.Add(time.Minute)
	r.s.fair.enqueue(topology.TaskID{Partition: 0}, tp0, []*kgo.Record{{Topic: "in", Partition: 0, Offset: 6,
		Key: []byte("k"), Value: []byte("6"), Timestamp: time.UnixMilli(6)}}, 1, later)
	r.s.observeQueues(later)
	if got := metricValue(r.s.app.metrics.lag); got != 2 {
		t.Fatalf("a new record and its marker: lag %v, want 2", got)
	}
}
