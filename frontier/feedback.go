package frontier

import "sort"

// feedback closes the loop on observed staleness.
//
// Every acked commit reports the staleness of its outputs: its oldest,
// commit end − the oldest input arrival among them, and its mean. The
// outputs of one commit are taken as spread evenly between
// 2·mean − oldest and oldest (exact for the uniform arrivals of a steady
// cycle), and the last feedbackWindow commits so summarised give the
// observed p99 over outputs (weighted by count, found by bisection).
//
// The observed p99 is compared with the p99 the model predicted for the
// same commits (recorded when each started). When observed exceeds
// predicted by more than feedbackMargin, the relative excess, less the
// margin, is integrated: I += feedbackGain·(obs/pred − 1 − margin); when
// it is within the margin, I leaks back at feedbackLeak per ack. The
// controller then commits every T·(1 − I) instead of T: a model that
// underestimates the p99 (queueing the P-K form misses, a lognormal
// latency tail longer than mean + 4·dev) is corrected by shorter
// intervals. I stays within [0, feedbackMaxCorrection] (the bounds), and
// it does not integrate while shortening cannot help (anti-windup): when
// T·(1−I) is already at the floor T_lo, or while overloaded or draining,
// where shorter intervals take capacity the backlog needs.
type feedback struct {
	ring       [feedbackWindow]commitSample
	next, size int
	integral   float64
	observed   float64 // observed p99 over the window, s
	predicted  float64 // output-weighted mean of the predicted p99s, s
}

type commitSample struct {
	lo, hi    float64 // staleness range of the commit's outputs, s
	n         float64
	predicted float64 // P99 at the interval in force when it started
}

const (
	feedbackWindow        = 128
	feedbackMargin        = 0.10
	feedbackGain          = 0.05
	feedbackLeak          = 0.01
	feedbackMaxCorrection = 0.5
	// feedbackMinCommits is how many commits the window needs before
	// the loop acts: one slow commit is not a trend.
	feedbackMinCommits = 16
)

// observe adds one acked commit of n outputs with the given oldest and
// mean staleness (s) and the p99 predicted when it started. canShrink is
// false when a shorter interval cannot help (anti-windup).
func (f *feedback) observe(n int64, oldest, mean, predicted float64, canShrink bool) {
	if n <= 0 || predicted <= 0 {
		return
	}
	lo := max(0, 2*mean-oldest)
	f.ring[f.next] = commitSample{lo: lo, hi: oldest, n: float64(n), predicted: predicted}
	f.next = (f.next + 1) % feedbackWindow
	f.size = min(f.size+1, feedbackWindow)
	f.observed, f.predicted = f.quantile(0.99)
	if f.size < feedbackMinCommits {
		return
	}
	excess := f.observed/f.predicted - 1 - feedbackMargin
	switch {
	case excess > 0 && canShrink:
		f.integral += feedbackGain * excess
	case excess <= 0:
		f.integral -= feedbackLeak
	}
	f.integral = min(feedbackMaxCorrection, max(0, f.integral))
}

// quantile returns the output-weighted q-quantile of staleness over the
// window and the output-weighted mean prediction.
func (f *feedback) quantile(q float64) (obs, pred float64) {
	s := f.ring[:f.size]
	var total, hi float64
	for _, c := range s {
		total += c.n
		pred += c.n * c.predicted
		hi = max(hi, c.hi)
	}
	if total == 0 {
		return 0, 0
	}
	pred /= total
	// above is the share of outputs staler than x; it falls with x.
	above := func(x float64) float64 {
		var a float64
		for _, c := range s {
			switch {
			case x < c.lo:
				a += c.n
			case x < c.hi:
				a += c.n * (c.hi - x) / (c.hi - c.lo)
			}
		}
		return a / total
	}
	const steps = 1 << 12
	i := sort.Search(steps, func(i int) bool { return above(hi*float64(i)/steps) <= 1-q })
	return hi * float64(i) / steps, pred
}

// factor is the multiplier the correction applies to T.
func (f *feedback) factor() float64 { return 1 - f.integral }
