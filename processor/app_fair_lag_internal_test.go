package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
)

// feedMerged is a fetch of n records of key on topic (one partition) with
// event times from ts0 ms, offsets from off, and the broker's last stable
// offset lso.
func feedMerged(topic, key string, off, ts0 int64, n int, lso int64) kgo.FetchTopic {
	var recs []*kgo.Record
	for i := range int64(n) {
		recs = append(recs, &kgo.Record{Topic: topic, Offset: off + i, Key: []byte(key), Value: []byte("v"),
			Timestamp: time.UnixMilli(ts0 + i)})
	}
	return kgo.FetchTopic{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: 0, HighWatermark: lso, LastStableOffset: lso, Records: recs}}}
}

// A task whose inputs both have a backlog (a start after downtime) reads
// the large one batch by batch, and the small one's records, later in
// event time, are all queued after the first fetch. It processed them as
// soon as the large input's first batch was done: their stream time closed
// the windows of the large input's next batches, and 100 of its 130
// records here were dropped as late. As in Kafka Streams (KIP-695), the
// task waits for the partition with records still on the broker.
func TestATaskWaitsForItsPartitionWithRecordsOnTheBroker(t *testing.T) {
	t.Parallel()
	s, tk, counts, now := newMergedSession(t, 500, nil)
	pass := func(fetches ...kgo.FetchTopic) {
		t.Helper()
		if len(fetches) > 0 {
			if _, err := s.enqueueFetches(kgo.Fetches{{Topics: fetches}}, *now); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(10 * time.Millisecond)
	}
	// a: 30 records of 130 fetched; b: all of its records, 60 s later.
	pass(feedMerged("a", "hot", 0, 1000, 30, 130), feedMerged("b", "cold", 0, 60000, 30, 30))
	if got := counts["cold@60000"]; got != "" {
		t.Fatalf("b's records were processed while a had 100 records on the broker (cold's window counted %s)", got)
	}
	pass(feedMerged("a", "hot", 30, 1030, 100, 130))
	pass()
	late := 0
	for _, n := range tk.Metrics().Dropped {
		late += int(n)
	}
	if late != 0 || counts["hot@0"] != "130" || counts["cold@60000"] != "30" {
		t.Fatalf("%d records dropped as late; hot's window counted %q, cold's %q; want 0, 130, 30", late, counts["hot@0"], counts["cold@60000"])
	}
}

// A commit marker after a partition's last record is fetched but not a
// record to process: counted as one left on the broker, every partition
// of a transactionally written topic (every repartition topic) would look
// behind after each fetch and hold its task back.
func TestAMarkerIsNotARecordLeftOnTheBroker(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	a := feedMerged("a", "hot", 0, 1000, 3, 4)
	a.Partitions[0].Records = append(a.Partitions[0].Records, &kgo.Record{Topic: "a", Offset: 3,
		Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Control: true, Transactional: true}), Timestamp: time.UnixMilli(1003)})
	queued, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{a, feedMerged("b", "cold", 0, 60000, 2, 2)}}}, *now)
	if err != nil {
		t.Fatal(err)
	}
	if queued != 5 {
		t.Fatalf("queued %d records, want 5 (the marker is not one)", queued)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counts["hot@0"] != "3" || counts["cold@60000"] != "2" {
		t.Fatalf("hot's window counted %q, cold's %q; want 3 and 2 in one pass", counts["hot@0"], counts["cold@60000"])
	}
}

// A partition of the task that no fetch has reached yet may hold older
// records: the task waits for it, but only unknownLagWait, since the
// fetches of an empty partition seldom reach the loop.
func TestATaskWaitsBoundedForAPartitionNeverFetched(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{feedMerged("b", "cold", 0, 60000, 2, 2)}}}, *now); err != nil {
		t.Fatal(err)
	}
	for elapsed := time.Duration(0); elapsed < unknownLagWait; elapsed += 100 * time.Millisecond {
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := counts["cold@60000"]; got != "" {
			t.Fatalf("b processed %v after the task started, a never fetched (cold's window %s)", elapsed, got)
		}
		*now = now.Add(100 * time.Millisecond)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counts["cold@60000"]; got != "2" {
		t.Fatalf("after %v without a fetch of a, cold's window counted %q, want 2", unknownLagWait, got)
	}
	// After an abort the consumer rewinds: the lag is unknown again.
	s.fair.discard()
	if p := s.fair.parts[changelog.TopicPartition{Topic: "a"}]; p == nil || p.known {
		t.Fatal("a's lag is known after the queues were discarded")
	}
}

// A task whose queue passed its bound while it waits for a partition with
// records on the broker pauses only its partitions with queued records:
// pausing the one it waits for (every partition of the task, as before)
// stopped its fetches, and the task waited for good.
func TestAFullTaskKeepsFetchingThePartitionItWaitsFor(t *testing.T) {
	t.Parallel()
	s, _, _, now := newMergedSession(t, 500, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s.cl = cl
	bound := s.fair.bound
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{
		feedMerged("a", "hot", 0, 1000, 0, 100), // fetched up to offset 0, 100 on the broker
		feedMerged("b", "cold", 0, 60000, bound+1, int64(bound+1)),
	}}}, *now); err != nil {
		t.Fatal(err)
	}
	s.fair.parts[changelog.TopicPartition{Topic: "a"}].known = true
	s.fair.parts[changelog.TopicPartition{Topic: "a"}].behind = 100
	if n, err := s.processPass(context.Background()); err != nil || n != 0 {
		t.Fatalf("processed %d (%v) while a has 100 records on the broker, want 0", n, err)
	}
	s.applyPauses()
	if got := fmt.Sprint(cl.PauseFetchPartitions(nil)); got != "map[b:[0]]" {
		t.Fatalf("full task waiting for a: paused %s, want only b", got)
	}
}

// A task that waits for its partition with records on the broker waits for
// a fetch, not by the user's choice: its backlog is the controller's too.
// observeQueues left out a waiting task's whole lag, as it does for a
// task held by admission control, so on a backlog (a start after
// downtime, the case the wait is for) the controller saw no backlog each
// time the task waited between fetches, and the least backlog of the
// commit cycle, from which it judges an overload, was about zero.
func TestATaskWaitingForAFetchReportsItsBacklogToTheController(t *testing.T) {
	t.Parallel()
	s, _, _, now := newMergedSession(t, 500, nil)
	// a: fetched, nothing queued, 100,000 records left on the broker.
	s.fair.enqueue(s.byInput[changelog.TopicPartition{Topic: "a"}].task.ID(), changelog.TopicPartition{Topic: "a"}, nil, 100_000, *now)
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if s.runnable() {
		t.Fatal("the task is runnable while a has 100,000 records on the broker")
	}
	s.observeQueues(*now)
	if got := s.ctrl.Snapshot().Backlog; got != 100_030 {
		t.Fatalf("the controller's backlog is %d while the task waits for a's fetch; want 100030", got)
	}
}
