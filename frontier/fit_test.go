package frontier

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSizeFitSeparatesPerCommitFromPerRecordCost(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	// 9 ms per commit plus 1.4 µs per record, as on the real broker at
	// 90% load, with commits of 1k–30k records 50 ms apart.
	var f sizeFit
	for range 200 {
		x := 1000 + 29000*rng.Float64()
		f.observe(x, 0.009+1.4e-6*x+0.001*rng.NormFloat64(), 0.05)
	}
	a, b, resid, ok := f.fit()
	if !ok {
		t.Fatal("no fit from sizes spread over 1k–30k records")
	}
	if math.Abs(a-0.009) > 0.002 || math.Abs(b-1.4e-6) > 0.2e-6 {
		t.Errorf("fit a=%v b=%v, want 9ms and 1.4µs", a, b)
	}
	if math.Abs(resid-0.001) > 0.0005 {
		t.Errorf("residual %v, want about the 1ms noise", resid)
	}

	var same sizeFit
	for range 200 {
		same.observe(5000, 0.02+0.001*rng.NormFloat64(), 0.05)
	}
	if _, _, _, ok := same.fit(); ok {
		t.Error("a slope fitted from commits of one size")
	}
	var flat sizeFit
	for range 200 {
		x := 1000 + 29000*rng.Float64()
		flat.observe(x, 0.030-1e-6*x, 0.05)
	}
	if _, _, _, ok := flat.fit(); ok {
		t.Error("a fit from cost that falls with size")
	}
}

// TestSizeFitForgetsAnOldRegime: a bulk load's slow commits, then fast
// ones of the same sizes. Commits seconds apart fade the old samples by
// time, so the fit does not keep reading the change as a slope.
func TestSizeFitForgetsAnOldRegime(t *testing.T) {
	var f sizeFit
	for i := range 100 {
		f.observe(3000+float64(i%5)*1000, 1.5, 3)
	}
	for i := range 10 {
		f.observe(3000+float64(i%5)*1000, 0.010, 0.5)
	}
	if a, b, _, ok := f.fit(); ok && a+b*5000 > 0.1 {
		t.Errorf("5s after commits became fast the fit predicts %v for 5000 records", a+b*5000)
	}
}

// TestPerRecordCostShortensTheInterval: the same measured commit (30 ms at
// 150 ms intervals, 120k records/s) read as all per-commit cost, and as
// 9 ms per commit plus per-record cost. Only the fixed part is amortised
// by a longer interval, so the optimum is shorter.
func TestPerRecordCostShortensTheInterval(t *testing.T) {
	whole := Model{Lambda: 120000, Service: 5e-6, CommitCost: 0.030, Latency: 0.032, LatencyHigh: 0.045}
	split := whole
	perRecord := (0.030 - 0.009) / (120000 * 0.15)
	split.CommitCost, split.CostPerRecord = 0.009, perRecord
	split.Latency, split.LatencyHigh, split.LatencyPerRecord = 0.011, 0.024, perRecord
	lo := 0.005
	tw, ts := whole.Minimise99(lo, 5), split.Minimise99(lo, 5)
	if ts >= tw {
		t.Errorf("optimum with the per-record split %v, as one per-commit cost %v; want shorter", ts, tw)
	}
	if got := split.AtInterval(0.15).Latency; math.Abs(got-0.032) > 1e-9 {
		t.Errorf("split latency at 150ms %v, want the measured 32ms", got)
	}
}

// TestIntervalGrowthIsSlewLimited: a service time that jumps past
// capacity (a GC pause, the broker taking both cores) makes the overload
// interval long; it may grow only twofold per second.
func TestIntervalGrowthIsSlewLimited(t *testing.T) {
	r := newRig(t, Options{}, 5*time.Millisecond, 20*time.Microsecond)
	first := r.c.Tick(r.now)
	if first.Interval > intervalStart {
		t.Errorf("first interval %v, want ≤ %v", first.Interval, intervalStart)
	}
	r.run(5*time.Second, 5000)
	base := r.last.Interval
	r.svc = 400 * time.Microsecond // 5000/s now needs twice the loop
	for i := 1; i <= 3; i++ {
		r.run(time.Second, 5000)
		limit := time.Duration(float64(base) * math.Exp2(float64(i)) * 1.01)
		if r.last.Interval > limit {
			t.Errorf("%ds into the overload the interval is %v, want ≤ %v (from %v)", i, r.last.Interval, limit, base)
		}
	}
	if !r.last.Overloaded || r.last.Interval <= base {
		t.Errorf("overloaded %v, interval %v from %v: the test needs the overload interval to be longer", r.last.Overloaded, r.last.Interval, base)
	}
}

// TestRelaxSlackIgnoresTheLatencyTail: a commit latency tail of a second
// (after a bulk load) must not buy a longer interval than a short tail.
func TestRelaxSlackIgnoresTheLatencyTail(t *testing.T) {
	m := lightModel()
	tail := m
	tail.LatencyHigh = 1
	opt := m.Minimise99(0.005, 5)
	if r, rt := m.Relax(opt, 5, 0.1, 0), tail.Relax(opt, 5, 0.1, 0); math.Abs(rt-r) > 1e-6 {
		t.Errorf("relaxed interval %v with a 1s latency tail, %v with 20ms; want the same", rt, r)
	}
}
