package frontier

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// lightModel is a light load on a 10k records/s loop with 10ms commits.
func lightModel() Model {
	return Model{Lambda: 1000, Service: 100e-6, CommitCost: 0.010, Latency: 0.010, LatencyHigh: 0.020}
}

func TestP99Formula(t *testing.T) {
	// Without load or backlog the queue term is the commits' own P-K
	// wait; P99 = 0.99·T + L_high + Wq + F.
	m := lightModel()
	m.FetchFloor = 0.005
	for _, tt := range []float64{0.02, 0.05, 0.2} {
		rho := m.Rho(tt)
		want := 0.99*tt + m.LatencyHigh + m.steady(tt, rho) + m.FetchFloor
		if got := m.P99(tt); math.Abs(got-want) > 1e-12 {
			t.Errorf("P99(%v) = %v, want %v", tt, got, want)
		}
		if m.P99(tt) <= m.Staleness(tt) {
			t.Errorf("P99(%v) = %v not above the mean %v", tt, m.P99(tt), m.Staleness(tt))
		}
	}
	if !math.IsInf(m.P99(m.CommitCost/(1-m.Load())*0.99), 1) {
		t.Error("P99 finite where ρ ≥ 1")
	}
	// A persistent backlog delays a record by the records ahead of it.
	b := m
	b.Backlog = 1000
	if d := b.P99(0.1) - m.P99(0.1); math.Abs(d-1000*m.Service/(1-m.CommitCost/0.1)) > 1e-9 {
		t.Errorf("backlog adds %v to P99, want B·s/(1−c/T)", d)
	}
}

// TestP99ObjectivePrefersShorterIntervalsThanTheMean: the p99 charges
// nearly a whole interval where the mean charges half, so its optimum is
// shorter.
func TestP99ObjectivePrefersShorterIntervalsThanTheMean(t *testing.T) {
	for _, load := range []float64{0.1, 0.5, 0.8} {
		m := lightModel()
		m.Lambda = load / m.Service
		lo := m.CommitCost / (0.98 - load) * 1.01
		mean, p99 := m.Minimise(lo, 5), m.Minimise99(lo, 5)
		if p99 > mean*1.001 {
			t.Errorf("load %.1f: p99 optimum %v above the mean optimum %v", load, p99, mean)
		}
		if m.P99(p99) > m.P99(mean)+1e-9 {
			t.Errorf("load %.1f: P99 at its own optimum %v exceeds P99 at the mean optimum %v", load, m.P99(p99), m.P99(mean))
		}
	}
}

func TestRelaxStaysWithinToleranceAndTarget(t *testing.T) {
	m := lightModel()
	opt := m.Minimise99(0.005, 5)
	for _, tol := range []float64{0, 0.02, 0.1, 0.5} {
		r := m.Relax(opt, 5, tol, 0)
		if r < opt || m.Objective99(r) > m.Objective99(opt)*(1+tol)+1e-12 {
			t.Errorf("tol %v: relaxed %v (J99 %v) from %v (J99 %v)", tol, r, m.Objective99(r), opt, m.Objective99(opt))
		}
		if tol > 0 && r <= opt {
			t.Errorf("tol %v: Relax did not lengthen the interval (%v)", tol, r)
		}
	}
	limit := m.P99(opt) * 1.01
	if r := m.Relax(opt, 5, 0.5, limit); m.P99(r) > limit+1e-12 {
		t.Errorf("relaxed P99 %v beyond the target %v", m.P99(r), limit)
	}
}

// TestBrokerSlopeBacksOff: when commit latency rises with the commit
// rate, the p99 optimum moves to longer intervals (fewer commits).
func TestBrokerSlopeBacksOff(t *testing.T) {
	m := lightModel()
	m.CommitRate = 30
	flat := m.Minimise99(0.005, 5)
	m.RateSlope = 0.0005 // 0.5ms per commit/s
	steep := m.Minimise99(0.005, 5)
	if steep <= flat*1.05 {
		t.Errorf("optimum with a latency slope %v, without %v; want clearly longer", steep, flat)
	}
	if k := m.LatencyScale(1.0 / 60); k <= 1 {
		t.Errorf("latency scale at 60 commits/s (measured at 30) = %v, want > 1", k)
	}
	if k := m.LatencyScale(1.0 / 1); k < minLatencyScale || k >= 1 {
		t.Errorf("latency scale at 1 commit/s = %v, want in [%v, 1)", k, minLatencyScale)
	}
}

func TestRateRegression(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var r rateRegression
	for i := range 2000 {
		x := 10 + 50*float64(i%7)/6 // 10..60 commits/s
		r.observe(x, 0.010+0.0002*x+0.002*rng.NormFloat64())
	}
	if b := r.slope(); math.Abs(b-0.0002) > 0.00005 {
		t.Errorf("slope %v, want 0.0002", b)
	}
	var flat rateRegression
	for range 2000 {
		flat.observe(30, 0.010+0.002*rng.NormFloat64())
	}
	if b := flat.slope(); b != 0 {
		t.Errorf("slope %v from a constant rate, want 0 (no spread to tell)", b)
	}
	var neg rateRegression
	for i := range 2000 {
		x := 10 + 50*float64(i%7)/6
		neg.observe(x, 0.030-0.0002*x)
	}
	if b := neg.slope(); b != 0 {
		t.Errorf("slope %v from falling latency, want clamped to 0", b)
	}
}

func TestFeedbackIntegratesBoundsAndLeaks(t *testing.T) {
	var f feedback
	// Observed twice the prediction: the correction grows, within bounds.
	for range 500 {
		f.observe(100, 0.2, 0.15, 0.1, true)
	}
	if f.observed < 0.19 || f.observed > 0.2 {
		t.Errorf("observed p99 %v, want just under the oldest 0.2", f.observed)
	}
	if f.integral != feedbackMaxCorrection {
		t.Errorf("integral %v after a persistent excess, want the bound %v", f.integral, feedbackMaxCorrection)
	}
	// Anti-windup: no integration while shrinking cannot help.
	var g feedback
	for range 500 {
		g.observe(100, 0.2, 0.15, 0.1, false)
	}
	if g.integral != 0 {
		t.Errorf("integral %v while it could not shrink, want 0", g.integral)
	}
	// Back within the margin, the correction leaks away.
	for range 500 {
		f.observe(100, 0.1, 0.075, 0.11, true)
	}
	if f.integral != 0 || f.factor() != 1 {
		t.Errorf("integral %v after the excess ended, want 0", f.integral)
	}
}

// TestControllerShrinksIntervalOnObservedExcess drives a controller whose
// outputs are all much staler at commit than the model predicts (their
// inputs arrived 200ms before they were produced): the feedback shortens
// T below the relaxed optimum, and the trace shows both p99s.
func TestControllerShrinksIntervalOnObservedExcess(t *testing.T) {
	r := newRig(t, Options{}, testLat, testSvc)
	r.run(2*time.Second, 3000)
	before := r.c.Snapshot()
	if before.Correction != 0 {
		t.Fatalf("correction %v before any excess", before.Correction)
	}
	// The same load, but every output's input arrived 200ms earlier.
	r.inputAge = 200 * time.Millisecond
	r.run(5*time.Second, 3000)
	d := r.c.Tick(r.now)
	tr := d.Trace
	if tr.Correction <= 0 || tr.ObservedP99 <= tr.PredictedP99 {
		t.Fatalf("trace %v: want a correction and observed p99 above predicted", tr)
	}
	if tr.Interval >= tr.Optimum {
		t.Errorf("interval %v not below the optimum %v despite correction %v", tr.Interval, tr.Optimum, tr.Correction)
	}
}

func TestDecisionCarriesTrace(t *testing.T) {
	r := newRig(t, Options{}, testLat, testSvc)
	r.run(2*time.Second, 5000)
	d := r.c.Tick(r.now)
	tr := d.Trace
	if tr.Interval != d.Interval || tr.PredictedP99 <= 0 || tr.ObservedP99 <= 0 || tr.ArrivalRate < 4000 ||
		tr.ServiceTime != testSvc || tr.CommitLatency <= 0 || tr.CommitCost <= 0 || tr.Blocked <= 0 || tr.CommitRate <= 0 {
		t.Errorf("decision trace incomplete: %v", tr)
	}
	s := r.c.Snapshot()
	if s.PredictedP99 != tr.PredictedP99 || s.ObservedP99 != tr.ObservedP99 || s.CommitRate != tr.CommitRate {
		t.Errorf("snapshot %+v disagrees with the trace %v", s, tr)
	}
}
