package processor

import (
	"sync"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Admission control (issue #15): frontier.Options.Tenants[t].Rate caps the
// records of tenant t the App (all its stream threads) processes per
// second.
//
// Each input record a task processes is charged one token of the tenant
// its source named for it (topology.WithTenant; the tenant its outputs
// carry, task.TakeTenant), from the App's bucket of that tenant, once:
// where it enters the App. Records read back from repartition topics
// carry the tenant on (its outputs are still the tenant's) but are not
// charged again, so Rate is the tenant's input records per second however
// many repartitions the topology has. A record's
// tenant is known only once its source has decoded it, so the charge comes
// after the record: when the tenant's bucket is empty, the record has been
// processed on credit and its partition is held — its queued records are
// not processed, and what is fetched meanwhile joins the queue, whose
// bound pauses the partition's fetching (kgo PauseFetchPartitions) once it
// is full — until the bucket grants the owed token, after the wait it
// named. Then the partition resumes where it stopped. The hold itself does
// not pause fetching: a hold lasts one token, and pausing and resuming at
// the tenant's rate would make the client drop and refetch the partition's
// buffered records over and over (measured: a throttled hot tenant then
// doubled the other tenants' p99). Over time a limited tenant's records are
// processed at its Rate, after an initial Burst (+1).
//
// Nothing is dropped, skipped or reordered: a held partition's records
// wait in offset order, its offsets are not committed past them, and all
// other tasks keep flowing. The task's other input partitions (a join's,
// a merge's) go on only with records older than the held partition's
// head (taskQueue.next): the task keeps timestamp order across them, so
// a hold cannot make a windowed operator drop the held records as late.
// The unit of
// throttling is the partition, because within a partition records commit
// in offset order: a partition that mixes tenants is throttled for all of
// them whenever one of them is over its rate. That is why hot tenants need
// partitions of their own (a tenant-aware partitioner for repartition and
// output topics places them), so that throttling one does not slow the
// others.
//
// The buckets are the App's, one per limited tenant, shared by its stream
// threads: a tenant's Rate is what the process admits of it, however many
// threads run its partitions. They outlive sessions, so a restart does not
// grant a new Burst. Holds belong to the session: a new session starts
// with none. An abort keeps them (the tokens were spent whatever happens
// to the transaction).

// admitHold is a partition's admission state.
type admitHold struct {
	owed  string    // the tenant owed a token for a record already processed; "" none
	since time.Time // when the partition was held
	retry time.Time // when to ask the bucket again
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
	if tenant == "" || s.app.topo.IsRepartitionTopic(p.tp.Topic) {
		// A record read back from a repartition topic was charged
		// where it entered the App: charged again, an App with one
		// GroupBy admitted half the tenant's Rate of its input.
		return
	}
	now := s.now()
	if ok, wait := s.app.buckets.admit(now, s.ctrl.Options(), tenant); !ok {
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

// releaseHolds asks the buckets again for the holds whose wait is over and
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
		ok, wait := s.app.buckets.admit(now, s.ctrl.Options(), h.owed)
		if !ok {
			h.retry = now.Add(wait)
			continue
		}
		s.app.metrics.fair.throttled.WithLabelValues(tenantLabel(h.owed)).Add(now.Sub(h.since).Seconds())
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

// tenantBuckets are an App's token buckets by tenant, made full when a
// tenant is first charged.
type tenantBuckets struct {
	mu      sync.Mutex
	buckets map[string]*frontier.TokenBucket
}

// admit takes one token of tenant's bucket (o's Rate and Burst), or tells
// how long until there is one. Tenants without a rate are admitted.
func (b *tenantBuckets) admit(now time.Time, o frontier.Options, tenant string) (bool, time.Duration) {
	t, ok := o.Tenants[tenant]
	if !ok || t.Rate <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	tb := b.buckets[tenant]
	if tb == nil {
		if b.buckets == nil {
			b.buckets = map[string]*frontier.TokenBucket{}
		}
		nb := frontier.NewTokenBucket(now, t.Rate, t.Burst)
		tb = &nb
		b.buckets[tenant] = tb
	}
	return tb.Take(now, 1)
}
