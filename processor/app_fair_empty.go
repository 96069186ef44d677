package processor

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// A partition a fetch passes on with no records (enqueueFetches) is not
// necessarily caught up. kgo passes one on beside other partitions'
// records when the broker gave it nothing: it is at its end, or the
// fetch's byte budget (FetchMaxBytes) went to the partitions before it, or
// what it got was an aborted transaction's records, which read_committed
// drops. Taken as caught up, a partition with records left on the broker
// let its task stop waiting for it (taskQueue.next) and run its other
// inputs ahead, and windows downstream dropped its records as late. How
// far behind it is follows from offsets: its last stable offset against
// the offset its fetching had reached (fetchPosition).

// stableOffset is the offset up to which p's partition can be read: its
// last stable offset, or its high watermark from a broker that reports
// none.
func stableOffset(p kgo.FetchPartition) int64 {
	if p.LastStableOffset >= 0 {
		return p.LastStableOffset
	}
	return p.HighWatermark
}

// enqueueEmpty records a fetch that passed tp (task id's) on with no
// records. Unless the partition's stable offset moved since its last
// fetch, the fetch is no news: it does not restart settleBehind's clock,
// or a partition whose fetching passed records the consumer does not hand
// on (a compacted log's emptied batches) would look behind, and hold its
// task back, for as long as such fetches came.
func (s *session) enqueueEmpty(id topology.TaskID, tp changelog.TopicPartition, p kgo.FetchPartition, polled time.Time) {
	next, ok := s.fetchPosition(tp, p)
	if !ok {
		return
	}
	stable := stableOffset(p)
	behind := max(0, stable-next)
	q := s.fair.parts[tp]
	if q != nil && q.known && q.stable == stable && q.tasked(s.fair, id) {
		q.behind = min(q.behind, behind)
	} else {
		s.fair.enqueue(id, tp, nil, behind, polled)
		q = s.fair.parts[tp]
		q.stable = stable
	}
	q.next, q.nextKnown = next, true
}

// fetchPosition is where tp's fetching is, for a fetch that passed it on
// with no records (p): after its last fetched record, or, before any
// since the consumer last rewound (a task's start, an abort), the group's
// committed offset, or the log's start (the consumer's reset offset)
// without one. ok is false when none is known: the fetch then tells
// nothing, and the partition's lag stays unknown (partQueue.lagging).
//
// Aborted records the consumer skipped are not seen here, so they count
// as left until the abort marker after them is fetched (it is kept, see
// enqueueFetches), or until settleBehind gives up on them.
func (s *session) fetchPosition(tp changelog.TopicPartition, p kgo.FetchPartition) (int64, bool) {
	stable := stableOffset(p)
	if q := s.fair.parts[tp]; q != nil && q.nextKnown {
		return q.next, true
	}
	if stable <= p.LogStartOffset {
		return stable, true // an empty log
	}
	if s.cl == nil {
		return 0, false
	}
	if c, ok := s.cl.CommittedOffsets()[tp.Topic][tp.Partition]; ok && c.Offset >= 0 {
		return c.Offset, true
	}
	if p.LogStartOffset >= 0 {
		return p.LogStartOffset, true
	}
	return 0, false
}

// tasked reports whether p is in task id's queue.
func (p *partQueue) tasked(f *fairQueues, id topology.TaskID) bool {
	q := f.tasks[id]
	return q != nil && slices.Contains(q.parts, p)
}
