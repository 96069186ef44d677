package frontier

import "math"

// leastSquares is an exponentially weighted least-squares fit of y on x:
// every sample's weight falls by a factor 1−forget per later sample, so
// the fit follows a process whose behaviour drifts.
type leastSquares struct {
	w, sx, sy, sxx, sxy, syy float64
	n                        uint64
}

func (l *leastSquares) add(x, y, forget float64) {
	k := 1 - forget
	l.w, l.sx, l.sy = k*l.w, k*l.sx, k*l.sy
	l.sxx, l.sxy, l.syy = k*l.sxx, k*l.sxy, k*l.syy
	l.addWeighted(x, y, 1)
}

// addWeighted adds a sample of weight w, without fading the others.
func (l *leastSquares) addWeighted(x, y, w float64) {
	l.w, l.sx, l.sy = l.w+w, l.sx+w*x, l.sy+w*y
	l.sxx, l.sxy, l.syy = l.sxx+w*x*x, l.sxy+w*x*y, l.syy+w*y*y
	l.n++
}

// moments returns the weighted means, the variance of x, the covariance
// and the variance of y.
func (l *leastSquares) moments() (mx, my, vx, cxy, vy float64) {
	if l.w <= 0 {
		return 0, 0, 0, 0, 0
	}
	mx, my = l.sx/l.w, l.sy/l.w
	return mx, my, l.sxx/l.w - mx*mx, l.sxy/l.w - mx*my, l.syy/l.w - my*my
}

// sizeFit regresses a commit's cost or latency on its size, the records
// the loop processed into its transaction: y = a + b·x.
//
// Why: most of a commit's work grows with what it carries. Its prepare
// flushes every changelog and output record of the transaction on the
// record loop, and the broker writes them before EndTxn returns. On the
// real broker at 90% load, commits every 50, 100 and 200 ms took 18, 28
// and 43 ms: about 9 ms per commit plus 1.4 µs per record. A model that
// takes the whole cost as per-commit believes a longer interval spreads it
// over more records, and chose 150–200 ms where 100 ms was best (and after
// any spike, seconds). With the fit, the per-record part joins the service
// time (it is paid whatever T is) and only the intercept a is the cost an
// interval amortises.
type sizeFit struct{ leastSquares }

const (
	// Samples fade by sizeForget each, and at least as a time-constant
	// sizeAge EWMA would over the time since the previous one: the fit
	// describes the last seconds of commits, however few there were, so a
	// broker that changed pace (a bulk load's slow commits, then fast ones
	// of similar size) is not read as a slope for long.
	sizeForget = 1.0 / 64
	sizeAge    = 2.0 // s
	// sizeMinWeight and sizeMinSpread keep the fit off until it rests on
	// enough recent samples and the sizes have varied enough (a
	// coefficient of variation of 0.2) to tell a slope from noise; until
	// then the per-commit mean is the model.
	sizeMinWeight = 12
	sizeMinSpread = 0.2
)

// observe adds a commit of records records that cost (or took) y seconds,
// elapsed seconds after the previous sample.
func (f *sizeFit) observe(records, y, elapsed float64) {
	f.add(records, y, max(sizeForget, 1-math.Exp(-max(0, elapsed)/sizeAge)))
}

// fit returns a ≥ 0, b ≥ 0 and the residual standard deviation; ok is
// false while the data cannot tell a slope.
func (f *sizeFit) fit() (a, b, resid float64, ok bool) {
	if f.w < sizeMinWeight {
		return 0, 0, 0, false
	}
	mx, my, vx, cxy, vy := f.moments()
	if mx <= 0 || vx < (sizeMinSpread*mx)*(sizeMinSpread*mx) {
		return 0, 0, 0, false
	}
	b = cxy / vx
	if b <= 0 {
		return 0, 0, 0, false
	}
	a = my - b*mx
	if a < 0 {
		// Through the origin: all of it per record.
		a, b = 0, (cxy+mx*my)/(vx+mx*mx)
	}
	rv := vy - b*cxy
	return a, b, math.Sqrt(max(0, rv)), true
}

// lastFit is the result of the last sizeFit that could tell a slope
// (Controller.fitCost).
type lastFit struct {
	a, b, resid float64
	ok          bool
}

// anchor is the last fit f with its intercept lowered to what the recent
// commits show: f's slope through their means, when that is lower. While
// the sizes do not vary enough for a new fit, the per-record part is the
// one f told apart, but kept as f learned it, an intercept from slow
// commits (a cold broker's first seconds) would outlive them, and the
// floor it sets would keep the interval, and so the sizes, from varying
// enough to learn another. Only lowered: an intercept too low lets the
// interval shorten, the sizes vary and a new fit come; one raised by a
// per-record cost f underestimated would grow with the interval, the chase
// the kept fit is there to stop. Until the fit has enough recent samples,
// f as it was.
func (l *sizeFit) anchor(f lastFit) (a, resid2, b float64) {
	mx, my, vx, cxy, vy := l.moments()
	if l.w < sizeMinWeight || my-f.b*mx >= f.a {
		return f.a, f.resid * f.resid, f.b
	}
	return max(0, my-f.b*mx), max(0, vy-2*f.b*cxy+f.b*f.b*vx), f.b
}
