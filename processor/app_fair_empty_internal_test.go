package processor

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
)

// emptyFetch is a fetch of topic's partition 0 that brought no records,
// with the broker's high watermark and last stable offset lso: what kgo
// passes on for a partition whose share of the fetch's byte budget
// (FetchMaxBytes) went to other partitions, or that brought only aborted
// records (read_committed drops them).
func emptyFetch(topic string, lso int64) kgo.FetchTopic {
	return kgo.FetchTopic{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: 0, HighWatermark: lso, LastStableOffset: lso}}}
}

// A partition a fetch passes on with no records is not caught up when its
// last stable offset is past what was fetched of it. It was taken as
// caught up (no records, nothing behind): the task stopped waiting for it
// and processed its other input's later records, whose stream time closed
// the lagging input's windows, and its records were then dropped as late
// (100 of 130 here).
func TestATaskWaitsForAPartitionFetchedEmptyWithRecordsLeft(t *testing.T) {
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
	// a's next fetch brings nothing: the budget went elsewhere.
	pass(emptyFetch("a", 130))
	if got := counts["cold@60000"]; got != "" {
		t.Fatalf("b's records were processed after a's empty fetch while a had 100 records on the broker (cold's window counted %s)", got)
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

// An empty fetch of a partition fetched up to its last stable offset is
// the partition caught up: the task goes on with its other inputs at once.
func TestAPartitionFetchedEmptyAtItsEndIsCaughtUp(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{
		feedMerged("a", "hot", 0, 1000, 30, 30), feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{emptyFetch("a", 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counts["hot@0"] != "30" || counts["cold@60000"] != "30" {
		t.Fatalf("hot's window counted %q, cold's %q; want 30 and 30 in one pass", counts["hot@0"], counts["cold@60000"])
	}
}

// A partition whose records left on the broker are an aborted
// transaction's (read_committed drops them, so its fetches come back
// empty) holds its task back only until the abort marker after them is
// fetched, or, should no marker come (compacted away), until settleBehind
// gives up on them: never for good.
func TestATaskWaitsForAnAbortedTailOnlyUntilItsMarker(t *testing.T) {
	t.Parallel()
	for _, marker := range []bool{true, false} {
		s, _, counts, now := newMergedSession(t, 500, nil)
		// a: 30 records fetched; offsets 30-38 aborted, 39 the abort marker.
		if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{
			feedMerged("a", "hot", 0, 1000, 30, 40), feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{emptyFetch("a", 40)}}}, *now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if counts["cold@60000"] != "" {
			t.Fatalf("marker %v: b processed while a's fetch had not passed its aborted records", marker)
		}
		if marker {
			ctl := feedMerged("a", "", 39, 1100, 1, 40)
			ctl.Partitions[0].Records[0].Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Control: true, Transactional: true})
			if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{ctl}}}, *now); err != nil {
				t.Fatal(err)
			}
		} else {
			*now = now.Add(lagSettle)
			s.fair.polled = *now
			s.observeQueues(*now)
		}
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if counts["hot@0"] != "30" || counts["cold@60000"] != "30" {
			t.Fatalf("marker %v: hot's window counted %q, cold's %q; want 30 and 30", marker, counts["hot@0"], counts["cold@60000"])
		}
	}
}

// A partition whose fetching passed records the consumer does not hand on
// (a compacted log's emptied batches, aborted records without a marker
// left) looks behind by its stable offset for good. Its empty fetches,
// which keep coming beside other partitions' records, must not restart
// settleBehind's clock each time, or its task would wait for it for good.
func TestEmptyFetchesOfAPartitionLeftBehindSettle(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	// a: 30 records fetched, its stable offset 40: offsets 30-39 emptied by compaction.
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{
		feedMerged("a", "hot", 0, 1000, 30, 40), feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	for elapsed := time.Duration(0); elapsed <= 2*lagSettle; elapsed += 100 * time.Millisecond {
		if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{emptyFetch("a", 40)}}}, *now); err != nil {
			t.Fatal(err)
		}
		s.fair.polled = *now
		s.observeQueues(*now)
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(100 * time.Millisecond)
	}
	if counts["cold@60000"] != "30" {
		t.Fatalf("b not processed %v after a's last records, its empty fetches coming all along (cold's window %q)", 2*lagSettle, counts["cold@60000"])
	}
	// Records written after that are waited for again.
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{emptyFetch("a", 50)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if p := s.fair.parts[changelog.TopicPartition{Topic: "a"}]; p.behind != 10 {
		t.Fatalf("a's stable offset moved 40 → 50, behind %d; want 10", p.behind)
	}
}

// A partition's first fetch since its task started may bring no records
// although its log holds some (the fetch's budget went elsewhere): its
// position is then its committed offset, or its log's start without one,
// and the task waits for the records after it. A log that is empty (its
// start at its stable offset, as a purged repartition topic's) is caught up.
func TestAPartitionFirstFetchedEmptyIsBehindFromItsPosition(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s.cl = cl // no group: no committed offsets
	a := emptyFetch("a", 100)
	a.Partitions[0].LogStartOffset = 40
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{a, feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if p := s.fair.parts[changelog.TopicPartition{Topic: "a"}]; !p.known || p.behind != 60 {
		t.Fatalf("a fetched empty from its log start 40, stable offset 100: known %v, behind %d; want 60", p.known, p.behind)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counts["cold@60000"] != "" {
		t.Fatal("b processed while a had 60 records on the broker")
	}
	s.fair.discard()
	a.Partitions[0].LogStartOffset = 100 // purged up to its end
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{a}}}, *now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{feedMerged("b", "cold", 0, 60000, 30, 30)}}}, *now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counts["cold@60000"] != "30" {
		t.Fatalf("a's log is empty, yet b was not processed (cold's window %q)", counts["cold@60000"])
	}
}
