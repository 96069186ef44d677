package frontier

import "math"

// The p99 model. Controller v2 is judged by the 99th percentile of output
// staleness, not its mean, so it chooses T by a prediction of that
// percentile.
//
// Derivation. Commits start every T; commit k carries every output whose
// record was processed between the starts of commits k−1 and k, and makes
// them visible when it ends, L_k later. An output's staleness is the time
// from its input's arrival (when the record reached the process, see
// Controller.ObserveOutput) to that moment, plus the read_committed fetch
// floor F for a consumer to receive it:
//
//	staleness = (start_k − arrival) + L_k + F
//
// When the record loop keeps up, a record waits W (the queueing delay the
// previous commit's blocking and other records cause) and the start_k −
// arrival term is spread evenly over [W, T + W]: the oldest output of a
// commit arrived just after the previous commit started. Its p99 is
// 0.99·T + W. The commit latency L_k is independent of the arrival, so the
// tail of the sum is dominated by whichever tail is longer; adding the
// latency's high percentile (mean + 4·deviation, see meanDev) to 0.99·T
// bounds the sum's p99 from above without a convolution, and errs towards
// shorter intervals, the side the feedback loop (feedback.go) corrects.
// The wait W enters with its mean Wq(T) from the P-K model (model.go):
// the records that wait longest are the ones that arrived while a commit
// blocked the loop, i.e. at the start of a cycle, and their wait is
// already inside T as long as the queue drains within the cycle; Wq's
// 1/(1−ρ) growth is what stops T shrinking into saturation. So:
//
//	P99(T) = 0.99·T + L_high(T) + Wq(T) + F
//	J99(T) = P99(T) + h·(T/2 + R)²
//
// Broker awareness. On a broker that shares the machine's cores, commit
// latency grows with the commit rate. The controller regresses latency on
// the commit rate it measured (broker.go): L(T) = L + β·(1/T − r₀), with L
// measured at rate r₀ and β ≥ 0 the slope. Latency and commit cost are
// scaled by L(T)/L before the formulas above are evaluated, so a shorter T
// pays its marginal latency increase, on every commit, in the objective.
const (
	// p99Share is the share of an interval the 99th-percentile arrival
	// of a cycle waits for the commit that carries it.
	p99Share = 0.99
	// minLatencyScale bounds how much faster than measured the regression
	// may predict commits at a lower rate: a commit has a floor the
	// broker's load does not set (fsync, round trips).
	minLatencyScale = 0.25
	// maxLatencyScale bounds the other way, so one noisy slope cannot
	// make short intervals look infinitely expensive.
	maxLatencyScale = 20
)

// LatencyScale is L(T)/L: the factor commit latency and cost take at
// interval t (a commit rate of 1/t) relative to what was measured at the
// current rate r₀.
func (m Model) LatencyScale(t float64) float64 {
	if m.RateSlope <= 0 || m.Latency <= 0 || t <= 0 {
		return 1
	}
	l := m.Latency + m.RateSlope*(1/t-m.CommitRate)
	return min(maxLatencyScale, max(minLatencyScale, l/m.Latency))
}

// AtInterval is m with commit latency as the size fit predicts it for
// commits every t, and latency and cost as the rate regression predicts
// them at that rate.
func (m Model) AtInterval(t float64) Model {
	if m.LatencyPerRecord > 0 && t > 0 {
		d := m.LatencyPerRecord * m.Lambda * t
		m.Latency += d
		m.LatencyHigh += d
	}
	k := m.LatencyScale(t)
	if k == 1 {
		return m
	}
	m.Latency *= k
	m.LatencyHigh *= k
	m.CommitCost *= k
	m.CommitCostVar *= k * k
	return m
}

// P99 is the predicted 99th-percentile staleness of outputs committed
// every t: 0.99·t + L_high(t) + Wq(t) + F. +Inf when ρ(t) ≥ 1.
func (m Model) P99(t float64) float64 {
	n := m.AtInterval(t)
	rho := n.Rho(t)
	if rho >= 1 {
		return math.Inf(1)
	}
	return p99Share*t + n.LatencyHigh + n.steady(t, rho) + n.backlogWait(t) + m.FetchFloor
}

// backlogWait is the wait of a record that arrives behind the persistent
// backlog B: the loop works through B at the rate commits leave it,
// B·s/(1 − c/T). Wait's B·s/(1−ρ) is the time the backlog takes to drain
// while arrivals continue, which the mean charges to every record; a
// record's own wait, the quantity whose tail the p99 is, only sees the
// records ahead of it.
func (m Model) backlogWait(t float64) float64 {
	if m.Backlog <= 0 {
		return 0
	}
	return m.Backlog * m.Service / (1 - m.CommitCost/t)
}

// Objective99 is J99(T) = P99(T) + h·(T/2 + R)²: the p99 including the
// delay crashes add (as in Objective).
func (m Model) Objective99(t float64) float64 {
	x := t/2 + m.Restore
	return m.P99(t) + m.Hazard*x*x
}

// Minimise99 returns the T in [lo, hi] with the smallest J99 (the same
// search as Minimise).
func (m Model) Minimise99(lo, hi float64) float64 {
	return minimise(m.Objective99, lo, hi)
}

// Relax returns the longest interval in [t, hi] whose J99 exceeds J99(t)
// by at most tol times its interval-driven part and whose P99 stays
// within limit (no limit when limit ≤ 0): the p99 the optimum buys at the
// margin is not worth the commits it costs the broker, which the staleness
// model only partly sees (broker CPU taken from the record loop on a shared
// machine, transaction markers on every partition, coordinator writes). J99 rises beyond its
// optimum, so a bisection on log T finds the edge.
func (m Model) Relax(t, hi, tol, limit float64) float64 {
	if !(t < hi) || tol <= 0 {
		return t
	}
	// The slack is a share of the part of J99 the interval moves, not of
	// the commit latency's tail and the fetch floor: a slow or erratic
	// broker (a tail of a second after a bulk load) would otherwise buy
	// hundreds of milliseconds of interval at every decision.
	j := m.Objective99(t)
	if math.IsInf(j, 1) {
		return t
	}
	bound := j + tol*max(0, j-m.AtInterval(t).LatencyHigh-m.FetchFloor)
	ok := func(x float64) bool {
		return m.Objective99(x) <= bound && (limit <= 0 || m.P99(x) <= limit)
	}
	if ok(hi) {
		return hi
	}
	lo, up := math.Log(t), math.Log(hi)
	for range relaxIters {
		mid := (lo + up) / 2
		if ok(math.Exp(mid)) {
			lo = mid
		} else {
			up = mid
		}
	}
	return math.Exp(lo)
}

// relaxIters bisects log T to 0.1% of the [Tmin, Tmax] span's log.
const relaxIters = 20
