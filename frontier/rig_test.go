package frontier

import (
	"testing"
	"time"
)

// rig drives a Controller the way the runtime would, at 1ms steps, with a
// processor of fixed per-record cost whose loop blocks during commits.
type rig struct {
	t       *testing.T
	c       *Controller
	now     time.Time
	lat     time.Duration // commit latency (and cost: commits block)
	svc     time.Duration
	backlog float64
	carry   float64
	doneAt  time.Time
	bgRate  float64 // background load for traces
	// inputAge is how long before its output each input arrived (0: at
	// once), to make observed staleness exceed the model's.
	inputAge time.Duration
	// busyScale multiplies the busy time reported per processed record
	// (0: 1), to make the service-time estimate exceed the real cost.
	busyScale float64
	// latPerRecord adds to a commit's latency (and cost) per record
	// processed since the previous commit started.
	latPerRecord time.Duration
	sinceCommit  int
	last         Decision
	commits      []Decision
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRig(t *testing.T, o Options, lat, svc time.Duration) *rig {
	t.Helper()
	c, err := NewController(o)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, c: c, now: t0, lat: lat, svc: svc}
}

// run feeds rate records/s for d and commits whenever told to.
func (r *rig) run(d time.Duration, rate float64) {
	const step = time.Millisecond
	for end := r.now.Add(d); r.now.Before(end); r.now = r.now.Add(step) {
		r.carry += rate * step.Seconds()
		n := int(r.carry)
		r.carry -= float64(n)
		r.c.ObserveArrivals(r.now, n)
		r.backlog += float64(n)
		if r.c.inFlight {
			if !r.now.Before(r.doneAt) {
				r.c.ObserveCommitFinished(r.now, CommitAck{})
			} else {
				continue // the loop is blocked by the commit
			}
		}
		capacity := int(step / r.svc)
		p := min(int(r.backlog), capacity)
		if p > 0 {
			r.backlog -= float64(p)
			busy := time.Duration(p) * r.svc
			if r.busyScale > 0 {
				busy = time.Duration(float64(busy) * r.busyScale)
			}
			r.c.ObserveProcessed(r.now, p, busy)
			r.c.ObserveOutput(r.now, "", r.now.Add(-r.inputAge), p)
			r.sinceCommit += p
		}
		r.tick()
	}
}

func (r *rig) tick() Decision {
	d := r.c.Tick(r.now)
	r.last = d
	if d.Commit {
		r.commits = append(r.commits, d)
		r.c.ObserveCommitStarted(r.now)
		r.doneAt = r.now.Add(r.lat + time.Duration(r.sinceCommit)*r.latPerRecord)
		r.sinceCommit = 0
	}
	return d
}

// settle finishes any outstanding commit.
func (r *rig) settle() {
	if r.c.inFlight {
		r.now = later(r.now, r.doneAt)
		r.c.ObserveCommitFinished(r.now, CommitAck{})
	}
}

// background advances the clock by d with arrivals at bgRate processed as
// they come, without ticking: the trace decides when to tick and commit.
func (r *rig) background(d time.Duration) {
	const step = time.Millisecond
	end := r.now.Add(d)
	for r.now.Before(end) {
		r.now = r.now.Add(min(step, end.Sub(r.now)))
		r.carry += r.bgRate * step.Seconds()
		n := int(r.carry)
		r.carry -= float64(n)
		if n > 0 {
			r.c.ObserveArrivals(r.now, n)
			r.c.ObserveProcessed(r.now, n, time.Duration(n)*r.svc)
			r.c.ObserveOutput(r.now, "", r.now, n)
		}
	}
}
