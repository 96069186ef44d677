package frontier

import "math"

// Model is the staleness cost model of one commit group at one moment, in
// seconds and records per second. It is a pure value: the Controller fills
// it from its estimators on every Tick, and tests and the simulator can
// evaluate it directly. See the package doc for the formulas.
type Model struct {
	Lambda     float64 // arrival rate λ, records/s
	Service    float64 // per-record service time s, s
	CommitCost float64 // processing capacity one commit takes, c, s
	// CommitCostVar is the variance of c, s²: with c it gives the second
	// moment of commit sizes that the P-K wait needs.
	CommitCostVar float64
	Latency       float64 // mean commit latency L, s
	LatencyHigh   float64 // high-percentile commit latency, s
	// Backlog is the persistent backlog: records that stayed queued
	// through a whole commit cycle. The queue every commit builds and
	// drains again is already in Wq; counting it here too would, with the
	// 1/(1−ρ) amplification near saturation, turn noise into seconds.
	Backlog float64
	Hazard  float64 // failure rate h, 1/s
	Restore float64 // expected restore time after a crash, R, s

	// The p99 model (p99.go) adds what the mean ignores.
	//
	// CommitRate is the measured commit rate r₀, commits/s, at which
	// Latency and CommitCost were observed; RateSlope is β, the regressed
	// increase of commit latency per commit/s (≥ 0): on a broker that
	// shares the machine, more commits make every commit slower.
	CommitRate float64
	RateSlope  float64
	// FetchFloor is the constant delay between a commit's end and a
	// read_committed consumer receiving its outputs, s.
	FetchFloor float64

	// CostPerRecord and LatencyPerRecord are the parts of a commit's cost
	// and latency that grow with the records it carries (fit.go), s per
	// record; CommitCost and Latency are then the per-commit parts. A
	// commit every T carries λ·T records, so its cost adds CostPerRecord
	// to every record's service time and its latency is
	// Latency + LatencyPerRecord·λ·T (AtInterval).
	CostPerRecord, LatencyPerRecord float64
}

// Load is λ·(s + the commit cost per record), the utilisation from
// processing alone.
func (m Model) Load() float64 { return m.Lambda * (m.Service + m.CostPerRecord) }

// Rho is ρ(T) = Load + c/T: λ·(s + per-record commit cost) + c/T.
func (m Model) Rho(t float64) float64 { return m.Load() + m.CommitCost/t }

// Wait is the queueing delay W(T) between an input's arrival and its
// processing; +Inf when ρ(T) ≥ 1.
func (m Model) Wait(t float64) float64 {
	rho := m.Rho(t)
	if rho >= 1 {
		return math.Inf(1)
	}
	return m.steady(t, rho) + m.Backlog*m.Service/(1-rho)
}

// steady is the Pollaczek–Khinchine mean wait of an M/G/1 queue whose jobs
// are records (rate λ, size s) and commits (rate 1/T, size c with variance
// Var(c)): Wq(T) = (λ·s² + (c² + Var(c))/T) / (2(1−ρ)). Per-record cost is
// nearly constant, so records enter as deterministic (M/D/1); commits enter
// with their measured second moment, because slow commits (a log roll, a
// coordinator hiccup) leave queues that drain only at the spare rate 1−ρ.
// Treating a timer's commits as Poisson arrivals overstates their
// irregularity, so Wq errs high (the simulator shows it 10–30% pessimistic
// at light load), which errs towards longer intervals: the safe side.
//
// A purely deterministic analysis of periodic commits gives
// c²/(2T(1−λs)) for the commit term instead, which predicts the mean
// better near saturation but has no interior optimum: with it the best T
// is always the smallest the commit budget allows, so early commits never
// have room to act and p99 suffers from running at the capacity edge. The
// P-K form keeps an interior optimum at light and medium load.
func (m Model) steady(t, rho float64) float64 {
	return (m.Lambda*m.Service*m.Service + (m.CommitCost*m.CommitCost+m.CommitCostVar)/t) / (2 * (1 - rho))
}

// Staleness is the expected staleness S(T) = T/2 + L + W(T).
func (m Model) Staleness(t float64) float64 { return t/2 + m.Latency + m.Wait(t) }

// MaxStaleness is the staleness of the oldest output of an interval when
// the commit is slow: T + L_high + W(T).
func (m Model) MaxStaleness(t float64) float64 { return t + m.LatencyHigh + m.Wait(t) }

// Exposure is the rollback exposure h·(T/2 + R): the long-run fraction of
// work lost to crashes and redone.
func (m Model) Exposure(t float64) float64 { return m.Hazard * (t/2 + m.Restore) }

// Objective is J(T) = S(T) + h·(T/2+R)², the expected staleness including
// the delay crashes add.
func (m Model) Objective(t float64) float64 {
	o := m.compile()
	return o.at(t)
}

// objective is J with its per-model constants folded, so the minimiser's
// evaluations cost two divisions each. It must agree with Staleness and
// Wait (TestCompiledObjectiveAgrees).
type objective struct {
	a, c2, u, c, bs, l, h, r float64
}

func (m Model) compile() objective {
	return objective{
		a: m.Lambda * m.Service * m.Service / 2, c2: (m.CommitCost*m.CommitCost + m.CommitCostVar) / 2,
		u: m.Load(), c: m.CommitCost, bs: m.Backlog * m.Service,
		l: m.Latency, h: m.Hazard, r: m.Restore,
	}
}

func (o *objective) at(t float64) float64 {
	it := 1 / t
	idle := 1 - o.u - o.c*it
	if idle <= 0 {
		return math.Inf(1)
	}
	inv := 1 / idle
	x := t/2 + o.r
	return t/2 + o.l + (o.a+o.bs+o.c2*it)*inv + o.h*x*x
}

// invPhi is 1/φ, the golden-section step.
var invPhi = (math.Sqrt(5) - 1) / 2

const (
	// gridPoints samples log T evenly to bracket the global minimum: J is
	// not always unimodal (the backlog term switches on where the backlog
	// exceeds the steady queue, and the rollback term is convex in T), so
	// a local search alone can settle in the wrong valley.
	gridPoints = 12
	// goldenIters then refines within the two grid cells around the best
	// point; each step shrinks the bracket by 1/φ, so 14 steps take the
	// default [5ms, 5s] bracket (two cells: a factor 3.5) to within 0.3% of
	// the optimum, far finer than the estimates it rests on.
	goldenIters = 14
)

// Minimise returns the T in [lo, hi] with the smallest objective: a coarse
// grid on log T brackets the best valley, golden-section search (on T, the
// bracket being narrow) refines it. If the objective is infinite everywhere
// (ρ ≥ 1 even at hi) it returns hi, the interval that costs the least
// capacity.
func (m Model) Minimise(lo, hi float64) float64 {
	o := m.compile()
	return minimise(o.at, lo, hi)
}

// minimise is Minimise's search over any objective f of the same shape.
func minimise(f func(float64) float64, lo, hi float64) float64 {
	if !(lo < hi) {
		return hi
	}
	if math.IsInf(f(hi), 1) {
		return hi
	}
	var grid [gridPoints]float64
	ratio := math.Pow(hi/lo, 1.0/(gridPoints-1))
	best, bestJ := 0, math.Inf(1)
	t := lo
	for i := range grid {
		if i == gridPoints-1 {
			t = hi
		}
		grid[i] = t
		if j := f(t); j < bestJ {
			best, bestJ = i, j
		}
		t *= ratio
	}
	a, b := grid[max(best-1, 0)], grid[min(best+1, gridPoints-1)]
	x1 := b - invPhi*(b-a)
	x2 := a + invPhi*(b-a)
	f1, f2 := f(x1), f(x2)
	for i := 0; i < goldenIters; i++ {
		if f1 <= f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - invPhi*(b-a)
			f1 = f(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + invPhi*(b-a)
			f2 = f(x2)
		}
	}
	if t := (a + b) / 2; f(t) <= bestJ {
		return t
	}
	// The best grid point is an end (lo or hi) or the valley is flatter
	// than the search resolution.
	return grid[best]
}
