package processor

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
)

// idleTracker decides which input partitions are idle, like Kafka Streams'
// max.task.idle.ms: a partition is idle once it has delivered no record for
// the timeout while the consumer kept polling and its end offsets kept
// being read (see stale), and it is caught up: either the consumer's
// position has reached its last stable offset (LSO), or the LSO stood
// still for a timeout with nothing delivered (transaction markers and
// aborted records sit between the last record and the LSO of a
// transactionally written partition, and a position never reaches it). A
// partition that never had a record is not idle before that either: it
// holds its task back for one timeout after it was assigned.
//
// It is a deterministic core: the runtime feeds it positions and end
// offsets with the time it saw them, and asks.
type idleTracker struct {
	timeout time.Duration // ≤ 0: nothing is ever idle
	parts   map[changelog.TopicPartition]*idleState
}

type idleState struct {
	pos      int64     // the consumer's position, -1 unknown
	active   time.Time // when pos last changed (or tracking began)
	lso      int64     // last stable offset seen since, -1 none
	lsoSince time.Time // when lso was first seen at its value
	lsoAt    time.Time // when the latest end offset seen since was read
}

// idleProbeEvery is how often the end offsets of quiet partitions are
// read (frontierService.background).
func idleProbeEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/4, 50*time.Millisecond), time.Second)
}

// stale is the age past which an end offset says nothing about now: two
// reads, or half a timeout, missed. A partition whose end offsets cannot
// be read (the broker out of reach) is not idle, however quiet it looks:
// its producers may be writing what the consumer cannot see.
func (it *idleTracker) stale() time.Duration {
	return max(it.timeout/2, 2*idleProbeEvery(it.timeout))
}

func newIdleTracker(timeout time.Duration) *idleTracker {
	return &idleTracker{timeout: timeout, parts: map[changelog.TopicPartition]*idleState{}}
}

// observePosition records the consumer's position of tp (-1: unknown). A
// change is activity: the partition is busy again and its end offsets must
// be observed afresh.
func (it *idleTracker) observePosition(tp changelog.TopicPartition, pos int64, now time.Time) {
	st := it.parts[tp]
	if st == nil {
		it.parts[tp] = &idleState{pos: pos, active: now, lso: -1}
		return
	}
	if pos != st.pos {
		st.pos, st.active, st.lso, st.lsoAt = pos, now, -1, time.Time{}
	}
}

// observeEnd records tp's last stable offset as of at. Offsets observed
// before the last activity say nothing about the partition since. After a
// stretch with no end offset read (the broker out of reach), the quiet
// before it counts for nothing: records its producers could not write
// meanwhile (retried, stamped back then) may land any moment now, so the
// partition must look quiet for a whole timeout again.
func (it *idleTracker) observeEnd(tp changelog.TopicPartition, lso int64, at time.Time) {
	st := it.parts[tp]
	if st == nil || at.Before(st.active) || !at.After(st.lsoAt) {
		return
	}
	if !st.lsoAt.IsZero() && at.Sub(st.lsoAt) > it.stale() {
		st.active, st.lso = at, -1
	}
	st.lsoAt = at
	if lso != st.lso {
		st.lso, st.lsoSince = lso, at
	}
}

// retain forgets every partition not in keep (revoked ones).
func (it *idleTracker) retain(keep func(changelog.TopicPartition) bool) {
	for tp := range it.parts {
		if !keep(tp) {
			delete(it.parts, tp)
		}
	}
}

// wantEnds lists the partitions whose end offsets decide their idleness
// soon: quiet for half a timeout.
func (it *idleTracker) wantEnds(now time.Time) []changelog.TopicPartition {
	if it.timeout <= 0 {
		return nil
	}
	var out []changelog.TopicPartition
	for tp, st := range it.parts {
		if now.Sub(st.active) >= it.timeout/2 {
			out = append(out, tp)
		}
	}
	return out
}

// idle reports whether tp is idle at now.
func (it *idleTracker) idle(tp changelog.TopicPartition, now time.Time) bool {
	st := it.parts[tp]
	if it.timeout <= 0 || st == nil || now.Sub(st.active) < it.timeout || st.lso < 0 || now.Sub(st.lsoAt) > it.stale() {
		return false
	}
	if st.pos >= st.lso || (st.pos < 0 && st.lso == 0) {
		return true
	}
	return now.Sub(st.lsoSince) >= it.timeout
}

func (it *idleTracker) String() string {
	return fmt.Sprintf("idleTracker{timeout %v, %d partitions}", it.timeout, len(it.parts))
}
