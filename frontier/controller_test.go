package frontier

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	testLat = 10 * time.Millisecond
	testSvc = 100 * time.Microsecond // capacity 10k records/s
)

func TestIntervalRules(t *testing.T) {
	type load struct {
		name string
		rate float64
	}
	light, heavy := load{"light", 2000}, load{"overload", 9700}
	tests := []struct {
		name   string
		opts   Options
		a, b   load
		assert func(t *testing.T, a, b Snapshot)
	}{
		{"overload lengthens the interval", Options{}, light, heavy, func(t *testing.T, a, b Snapshot) {
			if !b.Overloaded || a.Overloaded {
				t.Fatalf("overloaded flags: light %v, overload %v", a.Overloaded, b.Overloaded)
			}
			if b.Interval <= a.Interval {
				t.Errorf("interval under overload %v, want > light-load %v", b.Interval, a.Interval)
			}
			share := b.CommitCost.Seconds() / b.Interval.Seconds()
			if share > DefaultOverloadCommitShare*1.0001 {
				t.Errorf("commits take %.3f of capacity under overload, want ≤ %v", share, DefaultOverloadCommitShare)
			}
		}},
		{"fixed policy ignores load", Options{Policy: PolicyFixed}, light, heavy, func(t *testing.T, a, b Snapshot) {
			if a.Interval != DefaultFixedInterval || b.Interval != DefaultFixedInterval {
				t.Errorf("fixed intervals %v and %v, want %v", a.Interval, b.Interval, DefaultFixedInterval)
			}
		}},
		{"light load commits faster than the fixed baseline", Options{}, light, light, func(t *testing.T, a, _ Snapshot) {
			if a.Interval >= DefaultFixedInterval {
				t.Errorf("interval %v at light load, want < %v", a.Interval, DefaultFixedInterval)
			}
			if a.Utilization > DefaultMaxUtilization {
				t.Errorf("planned utilisation %.3f, want ≤ %v", a.Utilization, DefaultMaxUtilization)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := func(l load) Snapshot {
				r := newRig(t, tt.opts, testLat, testSvc)
				r.run(5*time.Second, l.rate)
				r.tick()
				return r.c.Snapshot()
			}
			tt.assert(t, snap(tt.a), snap(tt.b))
		})
	}
}

func TestIntervalNeverBelowTminOrAboveTmax(t *testing.T) {
	for _, tt := range []struct {
		name string
		lat  time.Duration
		rate float64
	}{
		{"interval never below Tmin: idle input, instant commits", 50 * time.Microsecond, 0},
		{"interval never below Tmin: light input, instant commits", 50 * time.Microsecond, 100},
		{"interval never above Tmax: saturated input, slow commits", 400 * time.Millisecond, 20000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{MinInterval: 20 * time.Millisecond, MaxInterval: 2 * time.Second}
			r := newRig(t, o, tt.lat, testSvc)
			for i := 0; i < 20; i++ {
				r.run(250*time.Millisecond, tt.rate)
				d := r.tick()
				if d.Interval < o.MinInterval || d.Interval > o.MaxInterval {
					t.Fatalf("step %d: interval %v outside [%v, %v]", i, d.Interval, o.MinInterval, o.MaxInterval)
				}
			}
		})
	}
}

// TestCommitSpacing checks that no two commits start closer than Tmin, even
// with every early trigger firing all the time.
func TestCommitSpacing(t *testing.T) {
	o := Options{MinInterval: 15 * time.Millisecond, StalenessTarget: time.Millisecond + testLat}
	c, err := NewController(o)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	var starts []time.Time
	for i := 0; i < 2000; i++ {
		now = now.Add(time.Millisecond)
		c.ObserveArrivals(now, 5)
		c.ObserveProcessed(now, 5, 5*testSvc)
		c.ObserveOutput(now, "", now.Add(-time.Second), 5)
		c.ObserveWatermark(now, now, 1)
		if c.inFlight {
			c.ObserveCommitFinished(now, CommitAck{Cost: time.Millisecond})
		}
		if d := c.Tick(now); d.Commit {
			c.ObserveCommitStarted(now)
			starts = append(starts, now)
		}
	}
	if len(starts) < 2 {
		t.Fatalf("%d commits, want many", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < o.MinInterval {
			t.Fatalf("commits %d and %d %v apart, want ≥ %v", i-1, i, gap, o.MinInterval)
		}
	}
}

// primed returns a controller with estimates from a stretch of moderate load
// whose last commit has just finished, so the next commit is governed by
// the chosen interval and the early triggers.
func primed(t *testing.T, o Options) (*rig, time.Time) {
	t.Helper()
	r := newRig(t, o, testLat, testSvc)
	r.run(3*time.Second, 6000)
	r.settle()
	// Let the next commit start, taking everything produced so far.
	r.c.ObserveProcessed(r.now, 1, r.svc)
	for i := 0; ; i++ {
		if d := r.tick(); d.Commit {
			break
		}
		if i > 10000 {
			t.Fatalf("no commit within 10s of idle ticking: %+v", r.last)
		}
		r.now = r.now.Add(time.Millisecond)
	}
	start := r.now
	r.now = r.now.Add(r.lat)
	r.c.ObserveCommitFinished(r.now, CommitAck{})
	return r, start
}

func TestEarlyCommits(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		watermark  int           // windows closed after the commit
		inputAge   time.Duration // age of the pending output's input at the tick
		tenant     string
		wantCommit bool
		wantReason Reason
	}{
		{"watermark closing a pending window commits early", Options{}, 1, 0, "", true, ReasonWatermark},
		{"no watermark, no early commit", Options{}, 0, 0, "", false, ReasonWait},
		{"watermark under the fixed policy waits for the interval", Options{Policy: PolicyFixed}, 1, 0, "", false, ReasonWait},
		{"oldest output at target commits now", Options{StalenessTarget: 500 * time.Millisecond}, 0, 500 * time.Millisecond, "", true, ReasonStaleness},
		{"oldest output short of target minus latency waits", Options{StalenessTarget: 500 * time.Millisecond}, 0, 400 * time.Millisecond, "", false, ReasonWait},
		{"tight tenant target commits now", Options{Tenants: map[string]TenantOptions{"hot": {StalenessTarget: 200 * time.Millisecond}}}, 0, 200 * time.Millisecond, "hot", true, ReasonStaleness},
		{"unknown tenant gets the default target", Options{Tenants: map[string]TenantOptions{"hot": {StalenessTarget: 200 * time.Millisecond}}}, 0, 200 * time.Millisecond, "cold", false, ReasonWait},
		{"fixed policy: a listed tenant's tighter target commits early", Options{Policy: PolicyFixed, FixedInterval: time.Second, Tenants: map[string]TenantOptions{"gold": {StalenessTarget: 20 * time.Millisecond}}}, 0, 20 * time.Millisecond, "gold", true, ReasonStaleness},
		{"fixed policy: the default target does not", Options{Policy: PolicyFixed, FixedInterval: time.Second, StalenessTarget: 20 * time.Millisecond, Tenants: map[string]TenantOptions{"gold": {StalenessTarget: 20 * time.Millisecond}}}, 0, 20 * time.Millisecond, "std", false, ReasonWait},
		{"fixed policy: a listed target at the interval does not", Options{Policy: PolicyFixed, FixedInterval: time.Second, Tenants: map[string]TenantOptions{"gold": {StalenessTarget: time.Second}}}, 0, time.Second, "gold", false, ReasonWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, start := primed(t, tt.opts)
			s := r.c.Snapshot()
			at := start.Add(s.MinSpacing)
			if tt.opts.Policy != PolicyFixed && !at.Before(start.Add(s.Interval)) {
				t.Fatalf("precondition: min spacing %v not below interval %v", s.MinSpacing, s.Interval)
			}
			if tt.opts.Policy == PolicyFixed {
				at = start.Add(s.Interval / 2)
			}
			if at.Before(r.now) {
				t.Fatalf("precondition: commit latency %v exceeds min spacing %v", r.lat, s.MinSpacing)
			}
			r.now = at
			r.c.ObserveOutput(r.now, tt.tenant, r.now.Add(-tt.inputAge), 1)
			if tt.watermark > 0 {
				r.c.ObserveWatermark(r.now, r.now, tt.watermark)
			}
			d := r.c.Tick(r.now)
			if d.Commit != tt.wantCommit || d.Reason != tt.wantReason {
				t.Errorf("Tick = commit %v (%v), want %v (%v); interval %v spacing %v", d.Commit, d.Reason, tt.wantCommit, tt.wantReason, d.Interval, s.MinSpacing)
			}
		})
	}
}

func TestTickStateRules(t *testing.T) {
	t.Run("nothing processed or produced does not commit", func(t *testing.T) {
		c, _ := NewController(Options{})
		for i := 0; i < 100; i++ {
			now := t0.Add(time.Duration(i) * 50 * time.Millisecond)
			c.ObserveArrivals(now, 0)
			if d := c.Tick(now); d.Commit || (i > 0 && d.Reason != ReasonIdle) {
				t.Fatalf("tick %d: %+v, want idle", i, d)
			}
		}
	})
	t.Run("a commit in flight blocks the next", func(t *testing.T) {
		c, _ := NewController(Options{Policy: PolicyFixed})
		c.ObserveProcessed(t0, 1, time.Millisecond)
		c.ObserveCommitStarted(t0)
		c.ObserveProcessed(t0.Add(time.Millisecond), 1, time.Millisecond)
		d := c.Tick(t0.Add(time.Hour))
		if d.Commit || d.Reason != ReasonInFlight {
			t.Fatalf("Tick = %+v, want in-flight", d)
		}
		c.ObserveCommitFinished(t0.Add(time.Hour), CommitAck{})
		if d := c.Tick(t0.Add(time.Hour)); !d.Commit {
			t.Fatalf("after the ack Tick = %+v, want commit", d)
		}
	})
	t.Run("an aborted commit's outputs stay stale from their input time", func(t *testing.T) {
		c, _ := NewController(Options{})
		c.ObserveOutput(t0, "", t0, 10)
		c.ObserveCommitStarted(t0.Add(10 * time.Millisecond))
		c.ObserveCommitAborted(t0.Add(20 * time.Millisecond))
		if s := c.Snapshot(); s.Pending != 10 || s.Aborts != 1 {
			t.Fatalf("after abort pending %d aborts %d, want 10 and 1", s.Pending, s.Aborts)
		}
		c.ObserveCommitStarted(t0.Add(30 * time.Millisecond))
		c.ObserveCommitFinished(t0.Add(40*time.Millisecond), CommitAck{})
		if got := c.Snapshot().LastObservedStaleness; got != 40*time.Millisecond {
			t.Fatalf("observed staleness %v, want 40ms from the original input", got)
		}
	})
	t.Run("the tightest target among tenants with pending output applies", func(t *testing.T) {
		c, _ := NewController(Options{Tenants: map[string]TenantOptions{
			"fast": {StalenessTarget: 50 * time.Millisecond},
			"slow": {StalenessTarget: 5 * time.Second},
		}})
		c.ObserveOutput(t0, "slow", t0, 1)
		c.Tick(t0)
		if got := c.Snapshot().Target; got != 5*time.Second {
			t.Fatalf("target %v with only slow pending, want 5s", got)
		}
		c.ObserveOutput(t0, "fast", t0, 1)
		if got := c.Snapshot().Target; got != 50*time.Millisecond {
			t.Fatalf("target %v with fast pending, want 50ms", got)
		}
		c.ObserveCommitStarted(t0)
		c.ObserveCommitFinished(t0.Add(time.Millisecond), CommitAck{})
		if got := c.Snapshot().Target; got != DefaultStalenessTarget {
			t.Fatalf("target %v with nothing pending, want the default %v", got, DefaultStalenessTarget)
		}
	})
}

func TestObservedStalenessFromAcks(t *testing.T) {
	c, _ := NewController(Options{})
	// A session's first commit is slow (it registers the partitions with
	// the coordinator): it sets neither latency nor cost.
	c.ObserveOutput(t0, "", t0, 1)
	c.ObserveCommitStarted(t0)
	c.ObserveCommitFinished(t0.Add(500*time.Millisecond), CommitAck{Cost: 400 * time.Millisecond})
	c.Tick(t0.Add(500 * time.Millisecond))
	if s := c.Snapshot(); s.CommitLatency != DefaultCommitLatencyPrior || s.CommitCost != DefaultCommitLatencyPrior {
		t.Fatalf("after the first commit: latency %v cost %v, want the prior %v", s.CommitLatency, s.CommitCost, DefaultCommitLatencyPrior)
	}
	c, _ = NewController(Options{})
	c.ObserveCommitStarted(t0)
	c.ObserveCommitFinished(t0, CommitAck{})
	// Outputs from inputs at 0, 5 and 10ms, committed 20ms..30ms.
	c.ObserveOutput(t0, "", t0, 1)
	c.ObserveOutput(t0, "", t0.Add(5*time.Millisecond), 2)
	c.ObserveOutput(t0, "", t0.Add(10*time.Millisecond), 1)
	c.ObserveCommitStarted(t0.Add(20 * time.Millisecond))
	c.ObserveCommitFinished(t0.Add(30*time.Millisecond), CommitAck{Cost: 2 * time.Millisecond})
	c.Tick(t0.Add(30 * time.Millisecond))
	s := c.Snapshot()
	if s.ObservedStaleness != 30*time.Millisecond {
		t.Errorf("observed (oldest) staleness %v, want 30ms", s.ObservedStaleness)
	}
	if d := s.ObservedMeanStaleness - 25*time.Millisecond; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("observed mean staleness %v, want 25ms", s.ObservedMeanStaleness)
	}
	if s.CommitLatency != 10*time.Millisecond || s.CommitCost != 2*time.Millisecond {
		t.Errorf("latency %v cost %v, want 10ms and 2ms", s.CommitLatency, s.CommitCost)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		field string // "" means valid
	}{
		{"zero options are valid defaults", Options{}, ""},
		{"unknown policy is rejected", Options{Policy: "cron"}, "Policy"},
		{"Tmax must exceed Tmin", Options{MinInterval: time.Second, MaxInterval: time.Second}, "MaxInterval"},
		{"Tmin below a millisecond is rejected", Options{MinInterval: time.Microsecond}, "MinInterval"},
		{"utilisation must be below one", Options{MaxUtilization: 1}, "MaxUtilization"},
		{"overload share must be below max utilisation", Options{MaxUtilization: 0.5, OverloadCommitShare: 0.6}, "OverloadCommitShare"},
		{"commit share cap must be at least the overload share", Options{MaxCommitShare: 0.01}, "MaxCommitShare"},
		{"negative tenant rate is rejected", Options{Tenants: map[string]TenantOptions{"a": {Rate: -1}}}, `Tenants["a"].Rate`},
		{"rate bucket beyond the time constant is rejected", Options{RateBucket: time.Second}, "RateBucket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.Validate()
			if !reflect.DeepEqual(o, tt.opts) {
				t.Fatalf("Validate modified the options: %+v, was %+v", o, tt.opts)
			}
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field+" = ") || !strings.Contains(err.Error(), "want") {
				t.Fatalf("Validate = %v, want an error naming %s and its range", err, tt.field)
			}
		})
	}
}

func TestOptionsEnsureDefaults(t *testing.T) {
	tenants := map[string]TenantOptions{"hot": {Rate: 100}}
	o := Options{Policy: PolicyFixed, Tenants: tenants}
	o.EnsureDefaults()
	if o.FixedInterval != DefaultFixedInterval || o.MinInterval != DefaultMinInterval || o.Policy != PolicyFixed {
		t.Fatalf("defaults not filled, or a set field overwritten: %+v", o)
	}
	if got := o.Tenants["hot"]; got.StalenessTarget != DefaultStalenessTarget || got.Burst != 10 {
		t.Fatalf("tenant defaults %+v, want the application's staleness target and a tenth of a second of rate", got)
	}
	if tenants["hot"].Burst != 0 {
		t.Fatal("EnsureDefaults modified the caller's Tenants map")
	}
	if d := DefaultOptions(); !reflect.DeepEqual(d, *new(Options).EnsureDefaults()) || d.Policy != PolicyAdaptive {
		t.Fatalf("DefaultOptions() = %+v, want the zero Options filled in (adaptive)", d)
	}
	if d := DefaultOptions(); d.Validate() != nil {
		t.Fatalf("DefaultOptions().Validate() = %v", d.Validate())
	}
}

func TestAdmitRateLimitsPerTenant(t *testing.T) {
	c, err := NewController(Options{Tenants: map[string]TenantOptions{"hot": {Rate: 100, Burst: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(t0)
	for i := 0; i < 10; i++ {
		if ok, _ := c.Admit(t0, "hot", 1); !ok {
			t.Fatalf("record %d within burst refused", i)
		}
	}
	ok, wait := c.Admit(t0, "hot", 1)
	if ok || wait != 10*time.Millisecond {
		t.Fatalf("beyond burst: Admit = %v, %v; want refused, 10ms", ok, wait)
	}
	if ok, _ := c.Admit(t0, "other", 1000); !ok {
		t.Fatal("a tenant without a limit was refused: one hot tenant starved another")
	}
	if ok, _ := c.Admit(t0.Add(10*time.Millisecond), "hot", 1); !ok {
		t.Fatal("hot tenant refused after its refill time")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func TestSustainedOverloadLengthensTheIntervalFurther(t *testing.T) {
	interval := func(d time.Duration) Snapshot {
		r := newRig(t, Options{}, testLat, testSvc)
		r.run(d, 12000) // 120% of capacity: no interval keeps up
		r.tick()
		return r.c.Snapshot()
	}
	short, long := interval(5*time.Second), interval(60*time.Second)
	if !short.Overloaded || !long.Overloaded {
		t.Fatalf("overloaded flags %v, %v; want both", short.Overloaded, long.Overloaded)
	}
	if long.Interval <= short.Interval {
		t.Errorf("interval after 60s of overload %v, want longer than after 5s (%v)", long.Interval, short.Interval)
	}
	if long.Interval > DefaultMaxInterval {
		t.Errorf("interval %v above Tmax", long.Interval)
	}
}

// An overload is a queue the commit cycles do not clear. Estimates that
// say saturated while the queue clears (here a service time read 4× too
// high: 120% of capacity estimated, 30% real) hold the interval planned
// while the load left room, instead of the overload interval.
func TestSaturatedEstimatesWithAClearingQueueHoldTheInterval(t *testing.T) {
	r := newRig(t, Options{}, testLat, testSvc)
	r.run(5*time.Second, 3000)
	calm := r.c.Snapshot()
	r.busyScale = 4
	r.run(5*time.Second, 3000)
	held := r.c.Snapshot()
	if calm.Overloaded || held.Overloaded {
		t.Fatalf("overloaded: calm %v, saturated estimates %v; want neither (the queue clears)", calm.Overloaded, held.Overloaded)
	}
	if held.Load < 1 {
		t.Fatalf("precondition: estimated load %.2f, want ≥ 1", held.Load)
	}
	// The estimates ramp up through loads that leave commits less room
	// (the interval lengthens a little there); the overload floor,
	// c/OverloadCommitShare, would be 500 ms.
	if held.Interval > 2*calm.Interval {
		t.Errorf("interval %v under saturated estimates, want ≤ 2 × the calm %v", held.Interval, calm.Interval)
	}
	if held.MinSpacing > held.Interval {
		t.Errorf("min spacing %v, want ≤ the held interval %v", held.MinSpacing, held.Interval)
	}
	r.run(5*time.Second, 3000)
	if later := r.c.Snapshot(); later.Interval != held.Interval || later.Overloaded {
		t.Errorf("5 s later: interval %v (overloaded %v), want %v held", later.Interval, later.Overloaded, held.Interval)
	}
}

// Under an overload whose commits cost what they carry (a flush of every
// record the interval processed), a longer interval amortises nothing but
// the fixed part. Once the interval steadies the size fit can no longer
// tell the parts apart; the overload interval must then rest on the last
// fit's intercept, not on the mean cost, which grows with the interval and
// drove it to seconds.
func TestOverloadIntervalDoesNotChaseSizeProportionalCost(t *testing.T) {
	r := newRig(t, Options{}, 2*time.Millisecond, testSvc)
	r.latPerRecord = 20 * time.Microsecond
	for i := range 10 { // varied sizes: the fit can tell
		r.run(200*time.Millisecond, float64(2000+5000*(i%2)))
	}
	if s := r.c.Snapshot(); s.CostPerRecord == 0 {
		t.Fatalf("precondition: no size fit after varied loads (%+v)", s)
	}
	r.run(20*time.Second, 8500) // 8500 × (100 + 20) µs: 102% of capacity
	s := r.c.Snapshot()
	if !s.Overloaded {
		t.Errorf("not overloaded at 102%% load (backlog %d)", s.Backlog)
	}
	// The fixed part, 2 ms, at OverloadCommitShare is 100 ms; sqrt(2·c·H)
	// after 20 s is 0.28 s. The mean cost at T, 2 ms + 170 ms·T/s, at
	// OverloadCommitShare is 100 ms + 8.5·T: it chases Tmax.
	if s.Interval > time.Second {
		t.Errorf("overload interval %v after 20 s, want ≤ 1s (commit cost %v)", s.Interval, s.CommitCost)
	}
}

// A size fit learned while commits were slow (a cold broker's first
// seconds) must not outlive them. Once the interval steadies the fit can
// no longer tell a slope, and the last one stands in for it; its
// intercept, the per-commit cost the floor rests on, has to come down
// with the commits' cost as observed since. Kept as learned, a 20 ms intercept
// held the floor at 40 ms while commits cost 7 ms, so the interval could
// not shorten and the sizes never varied enough for a new fit (on the
// real broker: the first application after a broker start ran at twice
// the p99 of the next, for its whole run).
func TestLastSizeFitFollowsTheObservedCost(t *testing.T) {
	r := newRig(t, Options{}, 20*time.Millisecond, testSvc)
	r.latPerRecord = 2 * time.Microsecond
	for i := range 10 { // slow commits of varied sizes: the fit can tell
		r.run(200*time.Millisecond, float64(2000+5000*(i%2)))
	}
	slow := r.c.Snapshot()
	if slow.CostPerRecord == 0 || slow.CommitCost < 10*time.Millisecond {
		t.Fatalf("precondition: a fit with the slow commits' fixed cost (%+v)", slow)
	}
	r.lat = 3 * time.Millisecond // the broker has warmed up
	r.run(20*time.Second, 5000)
	s := r.c.Snapshot()
	if s.CommitCost > 6*time.Millisecond {
		t.Errorf("commit cost %v 20 s after commits fell to 3 ms + 2 µs/record (was %v), want ≤ 6ms", s.CommitCost, slow.CommitCost)
	}
	if s.MinSpacing > 2*slow.MinSpacing/3 {
		t.Errorf("min spacing %v, want well below the slow commits' %v", s.MinSpacing, slow.MinSpacing)
	}
}
