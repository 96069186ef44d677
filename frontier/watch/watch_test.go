package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/frontier/watch"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// publisher writes sink outputs and frontier records in transactions, as
// a tidemark instance does.
type publisher struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
}

func newPublisher(t *testing.T, topic string) *publisher {
	cl := kafkatest.Client(t, kgo.TransactionalID(kafkatest.UniqueName(t, "txn")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return &publisher{t: t, cl: cl, topic: topic}
}

// txn commits (or aborts) outputs and frontier records in one transaction.
func (p *publisher) txn(commit bool, recs ...*kgo.Record) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.cl.BeginTransaction(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *publisher) frontier(key string, r frontier.Record) *kgo.Record {
	p.t.Helper()
	v, err := r.MarshalBinary()
	if err != nil {
		p.t.Fatal(err)
	}
	return &kgo.Record{Topic: p.topic, Partition: 0, Key: []byte(key), Value: v}
}

func TestWatcherFollowsCommittedRecords(t *testing.T) {
	app := kafkatest.UniqueName(t, "watch")
	topic := kafkatest.NewTopic(t, 1, map[string]string{"cleanup.policy": "compact"})
	sink := kafkatest.NewTopic(t, 1, nil)
	p := newPublisher(t, topic)
	rec := func(wm int64, offset int64) frontier.Record {
		return frontier.Record{Sink: sink, Offsets: []int64{offset}, Feeds: []frontier.Feed{{SubTopology: 0, Tasks: 1}},
			Tasks: []frontier.TaskMark{{TaskRef: frontier.TaskRef{SubTopology: 0, Partition: 0}, WatermarkMs: wm}}}
	}
	out := func(ts int64) *kgo.Record {
		return &kgo.Record{Topic: sink, Partition: 0, Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}
	}
	p.txn(true, out(90), p.frontier(sink+"@a", rec(100, 1)))
	p.txn(false, out(190), p.frontier(sink+"@a", rec(200, 2))) // aborted: never seen

	w, err := watch.New(kafkatest.Brokers(t), app, watch.WithTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Sync reads past the transaction markers to the last stable offset.
	eventually(t, w, sink, func(st frontier.SinkStatus) bool { return len(st.Keys) == 1 })
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st, ok := w.Frontier(sink)
	if !ok || st.WatermarkMs != 100 || st.Partitions[0].Offset != 1 {
		t.Fatalf("after Sync: %+v, want watermark 100 at offset 1 (the aborted record ignored)", st)
	}
	if err := w.WaitCovers(ctx, sink, time.UnixMilli(100)); err != nil {
		t.Fatalf("WaitCovers(100): %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := w.WaitCovers(short, sink, time.UnixMilli(101)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCovers(101) with nothing covering it: %v, want the deadline", err)
	}

	// A waiter blocks until a commit covers its time, and the outputs are
	// readable when it returns.
	stable := kafkatest.StableEnds(t, sink)[0]
	done := make(chan error, 1)
	go func() { done <- w.WaitCovers(ctx, sink, time.UnixMilli(250)) }()
	select {
	case err := <-done:
		t.Fatalf("WaitCovers(250) returned early: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	p.txn(true, out(240), p.frontier(sink+"@a", rec(300, 4)))
	if err := <-done; err != nil {
		t.Fatalf("WaitCovers(250): %v", err)
	}
	if now := kafkatest.StableEnds(t, sink)[0]; now <= stable {
		t.Fatalf("WaitCovers(250) returned with the sink's last stable offset at %d, as before the commit", now)
	}
	kafkatest.ConsumeUntil(t, sink, 30*time.Second, func(recs []*kgo.Record) bool {
		for _, r := range recs {
			if r.Timestamp.UnixMilli() == 240 {
				return true
			}
		}
		return false
	})

	// A second task's publisher with no mark for task 0_1 yet: nothing is
	// covered; a tombstone removes a record. (EndTransaction returns before
	// the markers are written, so the watcher sees the commit a moment
	// later: Sync covers what was visible when it was called.)
	two := rec(300, 4)
	two.Feeds = []frontier.Feed{{SubTopology: 0, Tasks: 2}}
	p.txn(true, p.frontier(sink+"@b", two))
	eventually(t, w, sink, func(st frontier.SinkStatus) bool {
		return st.WatermarkMs == frontier.NoWatermark && st.UncoveredCount == 1
	})
	p.txn(true, &kgo.Record{Topic: p.topic, Partition: 0, Key: []byte(sink + "@b")})
	eventually(t, w, sink, func(st frontier.SinkStatus) bool { return st.WatermarkMs == 300 && len(st.Keys) == 1 })
}

func eventually(t *testing.T, w *watch.Watcher, sink string, cond func(frontier.SinkStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := w.Frontier(sink)
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher's frontier %+v never met the condition", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
