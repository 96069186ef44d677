package frontier

import "time"

// rateRegression regresses commit latency on the commit rate at which it
// was observed, by exponentially weighted least squares: y = a + β·x with
// x the commit rate (commits/s, measured over commitRateTau) when a commit
// started and y its latency (s). Old samples fade with weight
// (1−regressionForget) per sample, so the slope follows a broker whose
// load changes.
//
// Why: the broker runs on the same cores as the application, so every
// commit takes broker CPU (transaction markers, offset and coordinator
// writes) and at some rate the broker saturates and every commit slows
// down. The slope β is the marginal latency a commit per second adds; the
// p99 model (p99.go) charges it to short intervals, so the controller
// backs off when latency rises with rate instead of committing faster to
// chase the latency it causes.
type rateRegression struct{ leastSquares }

const (
	regressionForget = 1.0 / 1024
	// regressionMinSamples and regressionMinSpread keep the slope at zero
	// until the rate has varied enough to tell a slope from noise.
	regressionMinSamples = 16
	regressionMinSpread  = 2.0 // commits/s, standard deviation of x
	// maxRateSlope caps β at 5ms per commit/s: beyond that one outlier
	// ack could dominate the objective.
	maxRateSlope = 0.005
	// commitRateTau is the time constant of the commit-rate estimate;
	// commitRateBucket its shortest bucket.
	commitRateTau    = 2 * time.Second
	commitRateBucket = 100 * time.Millisecond
)

func (r *rateRegression) observe(x, y float64) { r.add(x, y, regressionForget) }

// slope is β, clamped to [0, maxRateSlope]; 0 until the data can tell.
func (r *rateRegression) slope() float64 {
	if r.n < regressionMinSamples || r.w <= 0 {
		return 0
	}
	_, _, vx, cxy, _ := r.moments()
	if vx < regressionMinSpread*regressionMinSpread {
		return 0
	}
	b := cxy / vx
	return min(maxRateSlope, max(0, b))
}
