package processor

import (
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Admission control (issue #15): frontier.Options.Tenants[t].Rate caps the
// records of tenant t the record loop processes per second.
//
// Each record a task processes is charged one token of the tenant its
// source named for it (topology.WithTenant; the tenant its outputs carry,
// task.TakeTenant), with frontier.Controller.Admit. A record's tenant is
// known only once its source has decoded it, so the charge comes after the
// record: when the tenant's bucket is empty, the record has been processed
// on credit and its partition is held — its queued records are not
// processed, and what is fetched meanwhile joins the queue, whose bound
// pauses the partition's fetching (kgo PauseFetchPartitions) once it is
// full — until Admit grants the owed token, after the wait it named. Then
// the partition resumes where it stopped. The hold itself does not pause
// fetching: a hold lasts one token, and pausing and resuming at the
// tenant's rate would make the client drop and refetch the partition's
// buffered records over and over (measured: a throttled hot tenant then
// doubled the other tenants' p99). Over time a limited tenant's records are
// processed at its Rate, after an initial Burst (+1).
//
// Nothing is dropped, skipped or reordered: a held partition's records
// wait in offset order, its offsets are not committed past them, and the
// task's other partitions (and all other tasks) keep flowing. The unit of
// throttling is the partition, because within a partition records commit
// in offset order: a partition that mixes tenants is throttled for all of
// them whenever one of them is over its rate. That is why hot tenants need
// partitions of their own (a tenant-aware partitioner for repartition and
// output topics places them), so that throttling one does not slow the
// others.
//
// Holds belong to the session's controller, whose buckets they draw on: a
// new session starts with full buckets and no holds. An abort keeps them
// (the tokens were spent whatever happens to the transaction).

// admitHold is a partition's admission state.
type admitHold struct {
	owed  string    // the tenant owed a token for a record already processed; "" none
	since time.Time // when the partition was held
	retry time.Time // when to ask Admit again
}

func (h admitHold) held() bool { return h.owed != "" }

// rateLimited reports whether any tenant has a rate: without one, records
// are not charged at all.
func rateLimited(o frontier.Options) bool {
	for _, t := range o.Tenants {
		if t.Rate > 0 {
			return true
		}
	}
	return false
}

// charge charges the record lt just processed (the head p had) to its
// tenant, holding p when the tenant is over its rate.
func (s *session) charge(lt *liveTask, p *partQueue) {
	if !s.admission {
		return
	}
	tenant := lt.task.TakeTenant()
	if tenant == "" {
		return
	}
	now := s.now()
	if ok, wait := s.ctrl.Admit(now, tenant, 1); !ok {
		p.hold = admitHold{owed: tenant, since: now, retry: now.Add(max(wait, minHold))}
		p.throttled = now
	}
}

// minHold is the shortest hold. The owed token alone comes after 1/Rate
// (0.4ms at 2500 records/s): released that early, the partition would get
// one record per loop pass, each pass with its poll, controller tick and
// pause bookkeeping. Held at least minHold, it finds Rate·minHold tokens
// on release and processes them in one pass; the tenant's rate is the
// same.
const minHold = 10 * time.Millisecond

// throttledFor is how long after its last hold a partition's queue and lag
// are left out of the backlog the commit controller is told about.
const throttledFor = time.Second

// releaseHolds asks Admit again for the holds whose wait is over and
// releases the partitions whose owed token it grants.
func (s *session) releaseHolds(now time.Time) {
	if !s.admission {
		return
	}
	for _, p := range s.fair.parts {
		h := &p.hold
		if !h.held() || now.Before(h.retry) {
			continue
		}
		ok, wait := s.ctrl.Admit(now, h.owed, 1)
		if !ok {
			h.retry = now.Add(wait)
			continue
		}
		s.app.metrics.fair.throttled.WithLabelValues(h.owed).Add(now.Sub(h.since).Seconds())
		*h = admitHold{}
		p.released = now
	}
}

// nextRelease is the earliest retry of a hold.
func (s *session) nextRelease() (time.Time, bool) {
	var at time.Time
	for _, p := range s.fair.parts {
		if p.hold.held() && (at.IsZero() || p.hold.retry.Before(at)) {
			at = p.hold.retry
		}
	}
	return at, !at.IsZero()
}
