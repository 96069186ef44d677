package frontier

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// simulateFailures runs a Poisson failure process of rate lambda (1/s) over
// uptime seconds, advancing h every step seconds, and returns h's estimate.
func simulateFailures(r *rand.Rand, h *Hazard, start time.Time, lambda, uptime, step float64) time.Time {
	now := start
	h.Advance(now)
	next := r.ExpFloat64() / lambda
	for t := 0.0; t < uptime; {
		adv := math.Min(step, uptime-t)
		if next <= adv {
			now = now.Add(duration(next))
			t += next
			h.ObserveFailure(now, "sim")
			next = r.ExpFloat64() / lambda
			continue
		}
		next -= adv
		t += adv
		now = now.Add(duration(adv))
		h.Advance(now)
	}
	return now
}

func TestHazardConvergesToTrueRate(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	tests := []struct {
		name     string
		opts     HazardOptions
		mtbf     time.Duration // true
		uptime   time.Duration
		tolerant float64 // relative
	}{
		// ~720 failures within a half-life: bias towards the prior ~1%,
		// noise ~4%.
		{"hourly failures, 24h prior", HazardOptions{}, time.Hour, 2 * 365 * 24 * time.Hour, 0.15},
		// A 10-minute MTBF against a 24h prior, forgetting over a week.
		{"frequent failures, short half-life", HazardOptions{HalfLife: 7 * 24 * time.Hour}, 10 * time.Minute, 60 * 24 * time.Hour, 0.15},
		// Failures rarer than the prior says: the uptime pulls it down.
		{"rare failures, pessimistic prior", HazardOptions{MeanTimeBetweenFailures: time.Hour, HalfLife: 10000 * time.Hour}, 48 * time.Hour, 20000 * 24 * time.Hour, 0.2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			h, err := NewHazard(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			lambda := 1 / tt.mtbf.Seconds()
			simulateFailures(r, h, t0, lambda, tt.uptime.Seconds(), 600)
			got := h.Rate()
			if rel := math.Abs(got-lambda) / lambda; rel > tt.tolerant {
				t.Errorf("rate %.3g/h (MTBF %v), true %.3g/h (MTBF %v): off by %.0f%%; state %+v",
					got*3600, h.MTBF().Round(time.Second), lambda*3600, tt.mtbf, rel*100, h.State())
			}
		})
	}
}

// A hazard that changes is relearned within a few half-lives.
func TestHazardForgets(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	// A 48h half-life holds ~140 failures at one per 30 minutes: ±9% of
	// noise, ±27% at three sigmas.
	h, err := NewHazard(HazardOptions{MeanTimeBetweenFailures: time.Hour, HalfLife: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := simulateFailures(r, h, t0, 1.0/60, 30*24*3600, 600) // a failure a minute for a month
	if got := h.MTBF(); got > 2*time.Minute {
		t.Fatalf("MTBF %v after a month of a failure a minute", got)
	}
	simulateFailures(r, h, now, 1.0/1800, 30*24*3600, 600) // then one every 30 minutes
	if got := h.MTBF(); got < 22*time.Minute || got > 40*time.Minute {
		t.Errorf("MTBF %v 15 half-lives after the failure rate dropped to one per 30m", got)
	}
}

func TestHazardPriorAndUpdates(t *testing.T) {
	h, err := NewHazard(HazardOptions{MeanTimeBetweenFailures: 10 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Rate(), 1/(10*3600.0); math.Abs(got-want) > 1e-12 {
		t.Fatalf("fresh rate %g, want the prior %g", got, want)
	}
	// One failure with no uptime observed: (1+1)/(36000) per second.
	h.ObserveFailure(t0, "test")
	if got, want := h.Rate(), 2/36000.0; math.Abs(got-want)/want > 1e-9 {
		t.Errorf("after a failure: rate %g, want %g", got, want)
	}
	// Ten hours of uptime, discounted by a 720h half-life.
	h.Advance(t0.Add(10 * time.Hour))
	k := math.Ln2 / (720 * 3600)
	f := math.Exp(-k * 36000)
	want := (1 + f) / (36000 + (1-f)/k)
	if got := h.Rate(); math.Abs(got-want)/want > 1e-9 {
		t.Errorf("after 10h: rate %g, want %g", got, want)
	}
	// Time going back adds nothing; Pause stops the clock.
	h.Advance(t0)
	h.Pause()
	h.Advance(t0.Add(1000 * time.Hour))
	if got := h.Rate(); math.Abs(got-want)/want > 1e-9 {
		t.Errorf("after a pause: rate %g, want %g", got, want)
	}
	if st := h.State(); st.FailuresTotal != 1 || st.LastCause != "test" || math.Abs(st.UptimeSeconds-36000) > 1e-6 {
		t.Errorf("state %+v", st)
	}
	if err := (&HazardOptions{HalfLife: time.Second}).Validate(); err == nil {
		t.Error("1s half-life accepted")
	}
	if err := (&HazardOptions{PriorWeight: -1}).Validate(); err == nil {
		t.Error("negative prior weight accepted")
	}
}

func TestHazardStateRoundTrip(t *testing.T) {
	h, _ := NewHazard(HazardOptions{})
	h.Advance(t0)
	h.ObserveFailure(t0.Add(time.Hour), "unclean_start")
	h.Advance(t0.Add(5 * time.Hour))
	b, err := json.Marshal(h.State())
	if err != nil {
		t.Fatal(err)
	}
	var st HazardState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	g, _ := NewHazard(HazardOptions{})
	if err := g.Restore(st); err != nil {
		t.Fatal(err)
	}
	if g.Rate() != h.Rate() || g.State().LastCause != "unclean_start" || !g.State().LastFailure.Equal(t0.Add(time.Hour)) {
		t.Errorf("restored %+v, saved %s", g.State(), b)
	}
	// The clock is stopped: the downtime is not uptime.
	g.Advance(t0.Add(100 * time.Hour))
	if g.Rate() != h.Rate() {
		t.Errorf("restored hazard counted the first Advance as uptime")
	}
	for _, bad := range []HazardState{{Version: 2}, {Version: 1, Failures: -1}, {Version: 1, ExposureSeconds: math.NaN()}} {
		if err := g.Restore(bad); err == nil {
			t.Errorf("restored %+v", bad)
		}
	}
}

// Daly's and Young's intervals against hand-computed values:
// δ=10s, M=1h: sqrt(2·10·3600) = 268.328; sqrt(δ/2M) = sqrt(1/720) =
// 0.037268, /3 = 0.012423; δ/18M = 10/64800 = 0.000154; 268.328·1.012577 −
// 10 = 261.703.
func TestDalyAgainstYoung(t *testing.T) {
	s := time.Second
	tests := []struct {
		delta, mtbf   time.Duration
		young, daly   float64 // seconds
		dalyIsTheMTBF bool
	}{
		{10 * s, time.Hour, 268.328, 261.703, false},
		{100 * time.Millisecond, 24 * time.Hour, 131.453, 131.387, false},
		{60 * s, 10 * time.Minute, 268.328, 229.819, false},
		// δ = M: sqrt(2)·M·(1 + sqrt(1/2)/3 + 1/18) − M = 0.82611·M.
		{time.Hour, time.Hour, 5091.169, 2974.012, false},
		// Just below 2M Daly tends to 2M·(1+1/3+1/9) − 2M = 8M/9.
		{7199 * s, time.Hour, 7199.500, 3200.000, false},
		// δ ≥ 2M: one checkpoint per MTBF.
		{3 * time.Hour, time.Hour, 8818.163, 3600, true},
	}
	for _, tt := range tests {
		if got := Young(tt.delta, tt.mtbf).Seconds(); math.Abs(got-tt.young) > 1e-3 {
			t.Errorf("Young(%v, %v) = %.3fs, want %.3fs", tt.delta, tt.mtbf, got, tt.young)
		}
		if got := Daly(tt.delta, tt.mtbf).Seconds(); math.Abs(got-tt.daly) > 1e-3 {
			t.Errorf("Daly(%v, %v) = %.3fs, want %.3fs", tt.delta, tt.mtbf, got, tt.daly)
		}
		if tt.delta > time.Hour {
			continue // beyond CostPrior's range
		}
		// The scheduler plans with the same rule.
		hz, _ := NewHazard(HazardOptions{MeanTimeBetweenFailures: tt.mtbf, PriorWeight: 1000})
		sc, err := NewCheckpointScheduler(CheckpointOptions{CostPrior: tt.delta, MaxInterval: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		sc.UseHazard(hz)
		d := sc.Tick(t0)
		want := CheckpointDaly
		if tt.dalyIsTheMTBF {
			want = CheckpointMTBF
		}
		if math.Abs(d.Interval.Seconds()-tt.daly) > 1e-3 || d.Bound != want || d.Daly != d.Interval || d.MTBF != tt.mtbf {
			t.Errorf("δ=%v M=%v: decision %+v, want interval %.3fs bound %v", tt.delta, tt.mtbf, d, tt.daly, want)
		}
	}
}

// The restore target caps Daly's interval: with 50000 writes/s, a restore
// rate of 10000/s and a 10s target, a crash may leave at most 100000
// records to replay, 2s of writes, less the checkpoint's own 200ms.
func TestCheckpointRestoreTargetCap(t *testing.T) {
	sc, err := NewCheckpointScheduler(CheckpointOptions{MeanTimeBetweenFailures: time.Hour,
		RestoreTarget: 10 * time.Second, RestoreRatePrior: 10000, CostPrior: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for range 60 * 100 { // a minute of writes, 500 every 10ms
		now = now.Add(10 * time.Millisecond)
		sc.ObserveChangelogWrites(now, 500)
	}
	d := sc.Tick(now)
	if math.Abs(d.Cap.Seconds()-1.8) > 0.02 || d.Interval != d.Cap || d.Bound != CheckpointRestoreTarget {
		t.Errorf("decision %+v, want interval = cap = 1.8s, bound restore_target", d)
	}
	if want := Daly(200*time.Millisecond, d.MTBF); (d.Daly - want).Abs() > time.Microsecond {
		t.Errorf("Daly's interval %v, want %v", d.Daly, want)
	}
	// Overdue: the checkpoint is started for the restore target, and
	// counted under it.
	if !d.Checkpoint || d.Reason != CheckpointRestoreTarget {
		t.Fatalf("decision %+v, want a checkpoint for restore_target", d)
	}
	sc.ObserveCheckpointStarted(now)
	if n, by := sc.CheckpointCounts(); n != 1 || by[CheckpointRestoreTarget] != 1 {
		t.Errorf("counts %d %v", n, by)
	}
	// Measured restores twice as fast double the cap (a little more: the
	// write rate decays while no writes land).
	sc.ObserveCheckpointFinished(now.Add(200*time.Millisecond), 200*time.Millisecond)
	sc.ObserveRestore(200000, 10*time.Second)
	if d := sc.Tick(now.Add(300 * time.Millisecond)); d.Cap < 3800*time.Millisecond || d.Cap > 4*time.Second {
		t.Errorf("cap %v with a 20000/s restore rate, want ~3.8s", d.Cap)
	}
}

// A shared Hazard carries failures between the controller, the scheduler
// and their successors.
func TestSharedHazard(t *testing.T) {
	hz, _ := NewHazard(HazardOptions{MeanTimeBetweenFailures: 24 * time.Hour})
	sc, _ := NewCheckpointScheduler(CheckpointOptions{CostPrior: time.Second})
	sc.UseHazard(hz)
	before := sc.Tick(t0)
	ctrl, err := NewController(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl.UseHazard(hz)
	for i := range 9 {
		ctrl.ObserveFailure(t0.Add(time.Duration(i) * time.Second))
	}
	if got := hz.State().FailuresTotal; got != 9 {
		t.Fatalf("shared hazard saw %d failures, want 9", got)
	}
	next, _ := NewCheckpointScheduler(CheckpointOptions{CostPrior: time.Second})
	next.UseHazard(hz)
	after := next.Tick(t0.Add(10 * time.Second))
	if after.MTBF > before.MTBF/5 || after.Interval >= before.Interval {
		t.Errorf("after 9 failures: MTBF %v interval %v, before %v %v", after.MTBF, after.Interval, before.MTBF, before.Interval)
	}
	ctrl.Tick(t0.Add(10 * time.Second))
	if got := ctrl.Snapshot().HazardRate; math.Abs(got-hz.Rate())/hz.Rate() > 1e-9 {
		t.Errorf("controller hazard %g, shared %g", got, hz.Rate())
	}
}
