package frontier

import "math"

// spanFit regresses a commit's cost or latency on its size across the
// intervals the controller ran at: one point per planned interval (bins a
// factor √2 apart), the mean size and mean cost of the commits planned at
// it, and a line through the points.
//
// Why not only sizeFit: it regresses on the sizes of commits at one
// operating point, and the part of a commit's cost that follows the
// operating point without following each commit's size lands in its
// intercept. On the real broker at 50% load the fit's intercept rose from
// 4 ms to 14 ms, and its per-record cost fell from 3.8 µs to 0.9 µs, as the
// interval it planned grew from 14 ms to 50 ms; the floor (intercept /
// headroom) followed the intercept, and the interval the floor. Fixed
// 20 ms and 50 ms in one run cost 7–8 ms and 15–16 ms per commit: 2.5 ms
// plus 3.2 µs per record between them. A shorter interval costs what the
// commits at that interval cost, so the slope that decides T is the one
// across intervals. The interval the controller plans is set before the
// commit and not by its size, so the means per interval do not take in
// what a commit's own size shares with its cost by chance.
type spanFit struct {
	bins [spanBins]spanBin
}

// spanBin is the commits planned at one interval: their weight (decayed
// by time), and their mean size and cost, each an EWMA over its commits.
type spanBin struct {
	w    float64
	x, y float64
	at   float64 // seconds (Controller epoch) of the last commit
}

const (
	// Bins are √2 apart from spanBase: 1 ms to 2^(spanBins/2) ms.
	spanBins = 32
	spanBase = 1e-3 // s
	// spanAge is the time constant of a bin's weight: a bin the interval
	// left keeps its point for tens of seconds, long enough to stand
	// against the bins the interval moves to, not long enough to outlive
	// a change of load by much.
	spanAge = 30.0 // s
	// spanGain is the weight of a new commit in its bin's means.
	spanGain = 1.0 / 16
	// spanMinWeight is the decayed commit count a bin needs to count,
	// spanMinSpread the coefficient of variation of the counting bins'
	// mean sizes the fit needs: two neighbouring bins are enough.
	spanMinWeight = 8
	spanMinSpread = 0.1
	spanMinShare  = 0.05
)

// binOf is the bin of interval t, s.
func binOf(t float64) int {
	if !(t > spanBase) {
		return 0
	}
	return min(spanBins-1, int(2*math.Log2(t/spanBase)))
}

// observe adds a commit planned at interval t, of records records, that
// cost (or took) y seconds, at now seconds.
func (f *spanFit) observe(t, records, y, now float64) {
	b := &f.bins[binOf(t)]
	if b.w == 0 {
		b.x, b.y = records, y
	} else {
		b.x += spanGain * (records - b.x)
		b.y += spanGain * (y - b.y)
	}
	b.w = b.w*math.Exp(-max(0, now-b.at)/spanAge) + 1
	b.at = now
}

// slope returns the per-record part b of the line through the bins'
// points at now, weighted by their decayed weights; ok is false while
// fewer than two bins count or their sizes do not differ enough. b is 0
// when the line's per-record part is less than spanMinShare of the mean
// cost: the cost is per commit, as far as the intervals tell.
func (f *spanFit) slope(now float64) (b float64, ok bool) {
	var l leastSquares
	bins := 0
	for i := range f.bins {
		bin := &f.bins[i]
		w := bin.w * math.Exp(-max(0, now-bin.at)/spanAge)
		if w < spanMinWeight {
			continue
		}
		bins++
		l.addWeighted(bin.x, bin.y, w)
	}
	if bins < 2 {
		return 0, false
	}
	mx, my, vx, cxy, _ := l.moments()
	if mx <= 0 || vx < (spanMinSpread*mx)*(spanMinSpread*mx) {
		return 0, false
	}
	if b = cxy / vx; b*mx < spanMinShare*my {
		return 0, true
	}
	return b, true
}

// through is the line of slope b through the recent commits' means (l's
// moments): its intercept a ≥ 0 and its residual variance. ok is false
// until l rests on enough recent samples.
func (l *sizeFit) through(b float64) (a, resid2 float64, ok bool) {
	if l.w < sizeMinWeight {
		return 0, 0, false
	}
	mx, my, vx, cxy, vy := l.moments()
	return max(0, my-b*mx), max(0, vy-2*b*cxy+b*b*vx), true
}
