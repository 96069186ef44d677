package frontier

import (
	"fmt"
	"time"
)

// Trace is what a Decision rests on, so every decision can be logged and
// explained after the fact: the chosen interval and the p99 it predicts,
// the p99 observed over recent commits, and the estimates behind them.
type Trace struct {
	// Interval is T, after the feedback correction; Optimum is the
	// relaxed J99 optimum before it (equal to Interval under the fixed
	// policy and in overload).
	Interval, Optimum time.Duration
	// PredictedP99 is P99(T) (p99.go); ObservedP99 the output-weighted
	// p99 over the last commits (feedback.go), 0 before the first ack.
	PredictedP99, ObservedP99 time.Duration
	// Correction is the feedback integral I: T = Optimum·(1 − I).
	Correction float64
	// ArrivalRate is λ (records/s), ServiceTime s (per record).
	ArrivalRate float64
	ServiceTime time.Duration
	// CommitLatency is L (mean), CommitCost c (record-loop time per
	// commit), Blocked the record-loop time the last acked commit took.
	CommitLatency, CommitCost, Blocked time.Duration
	// CommitRate is the measured commits/s; LatencySlope β, the regressed
	// commit latency added per commit/s (s per commit/s).
	CommitRate, LatencySlope float64
}

// String renders the trace as key=value pairs for logs.
func (t Trace) String() string {
	return fmt.Sprintf("T=%v opt=%v p99_pred=%v p99_obs=%v corr=%.3f λ=%.0f/s s=%v L=%v c=%v blocked=%v commits/s=%.1f β=%.2gs",
		t.Interval, t.Optimum, t.PredictedP99, t.ObservedP99, t.Correction, t.ArrivalRate, t.ServiceTime,
		t.CommitLatency, t.CommitCost, t.Blocked, t.CommitRate, t.LatencySlope)
}

// trace fills a Trace from the current plan and estimates.
func (c *Controller) trace() Trace {
	p := &c.plan
	m := p.model
	return Trace{
		Interval:      duration(p.interval),
		Optimum:       duration(p.optimum),
		PredictedP99:  duration(p.p99),
		ObservedP99:   duration(c.fb.observed),
		Correction:    c.fb.integral,
		ArrivalRate:   m.Lambda,
		ServiceTime:   duration(m.Service),
		CommitLatency: duration(m.Latency),
		CommitCost:    duration(m.CommitCost),
		Blocked:       duration(c.blocked),
		CommitRate:    m.CommitRate,
		LatencySlope:  m.RateSlope,
	}
}
