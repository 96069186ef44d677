package frontier

import (
	"math"
	"time"
)

// meanDev is the Jacobson/Karels estimator TCP uses for round-trip times:
// an EWMA of the samples and an EWMA of their absolute deviation from it.
// mean + 4·dev is TCP's retransmission bound and serves here as a cheap,
// robust stand-in for a high percentile: it needs no buffers, adapts to a
// shift within a few dozen samples and a single outlier moves it by only a
// fraction of its size.
type meanDev struct {
	mean, dev float64
	vr        float64 // EWMA of squared deviation: a variance, for P-K terms
	n         uint64
}

const (
	meanGain = 1.0 / 8
	devGain  = 1.0 / 4
	// highDevs is how many deviations above the mean "high" means.
	highDevs = 4
)

func (e *meanDev) observe(x float64) {
	if e.n == 0 {
		e.mean, e.dev = x, x/2
	} else {
		err := x - e.mean
		e.mean += meanGain * err
		e.dev += devGain * (math.Abs(err) - e.dev)
		e.vr += devGain * (err*err - e.vr)
	}
	e.n++
}

// observeAged is observe for samples that come at a varying pace: a
// sample that follows a quiet stretch of elapsed seconds gets at least the
// weight a time-constant-tau EWMA gives it (1−exp(−elapsed/τ)). With
// commits every few milliseconds that is the per-sample gain; with
// commits seconds apart it is most of the weight. Per sample alone, an
// estimate inflated by a few huge transactions (a bulk load, a restore
// backlog) makes the controller choose long intervals, which makes the
// samples that would correct it rare: it recovered one commit at a time,
// over tens of seconds of multi-second staleness.
func (e *meanDev) observeAged(x, elapsed, tau float64) {
	if e.n == 0 || elapsed <= 0 || tau <= 0 {
		e.observe(x)
		return
	}
	w := 1 - math.Exp(-elapsed/tau)
	mg, dg := max(meanGain, w), max(devGain, w)
	err := x - e.mean
	e.mean += mg * err
	e.dev += dg * (math.Abs(err) - e.dev)
	e.vr += dg * (err*err - e.vr)
	e.n++
}

func (e *meanDev) high() float64 { return e.mean + highDevs*e.dev }

// flow estimates a rate and a per-item cost from counts reported at
// arbitrary times. Counts accumulate into a bucket; when a bucket at least
// bucket long closes, its rate n/elapsed enters an EWMA with weight
// 1−exp(−elapsed/τ). That is the exact time-constant EWMA of a piecewise
// constant signal, so the estimate does not depend on how often or in what
// batch sizes the runtime reports, and a long silence counts as a long
// stretch of zero rate rather than as one sample. The per-item cost is the
// ratio of sums (busy time ÷ items) of a bucket, which weights by volume
// and is immune to tiny batches with noisy timings.
type flow struct {
	tau    float64 // seconds
	bucket time.Duration

	start  time.Time
	n      float64
	busy   float64
	primed bool

	rate  float64 // items per second
	rated bool    // rate has a measurement
	cost  float64 // seconds per item; 0 until measured
	seen  bool    // cost has a measurement
}

func newFlow(tau, bucket time.Duration) flow {
	return flow{tau: tau.Seconds(), bucket: bucket}
}

func (f *flow) add(now time.Time, n int, busy time.Duration) bool {
	changed := f.advance(now)
	f.n += float64(n)
	f.busy += busy.Seconds()
	return changed
}

// advance closes the current bucket if it is old enough and reports
// whether the estimates changed.
func (f *flow) advance(now time.Time) bool {
	if !f.primed {
		f.start, f.primed = now, true
		return false
	}
	el := now.Sub(f.start)
	if el < f.bucket {
		return false
	}
	sec := el.Seconds()
	a := 1 - math.Exp(-sec/f.tau)
	if !f.rated {
		// The first bucket sets the rate outright rather than ramping up
		// from zero over several time constants.
		a, f.rated = 1, true
	}
	f.rate += a * (f.n/sec - f.rate)
	if f.n > 0 && f.busy > 0 {
		c := f.busy / f.n
		if !f.seen {
			f.cost, f.seen = c, true
		} else {
			f.cost += a * (c - f.cost)
		}
	}
	f.start, f.n, f.busy = now, 0, 0
	return true
}

func duration(s float64) time.Duration {
	if math.IsInf(s, 1) || s > float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * 1e9)
}
