package frontier

import (
	"fmt"
	"time"
)

// Reason says why Tick decided what it did.
type Reason uint8

const (
	// ReasonWait: the interval has not elapsed and no early trigger fired.
	ReasonWait Reason = iota
	// ReasonIdle: nothing was processed or produced since the last commit.
	ReasonIdle
	// ReasonInFlight: a commit is outstanding; only one may be.
	ReasonInFlight
	// ReasonInterval: the chosen interval T has elapsed.
	ReasonInterval
	// ReasonWindowFinal: a watermark closed windows whose final results
	// are pending; the adaptive policy commits them at once (after the
	// commit in flight, if any), whatever the interval.
	ReasonWindowFinal
	// ReasonStaleness: some tenant's oldest uncommitted output, plus the
	// expected commit latency, reached its staleness target.
	ReasonStaleness

	numReasons

	// ReasonWatermark is the former name of ReasonWindowFinal.
	//
	// Deprecated: use ReasonWindowFinal.
	ReasonWatermark = ReasonWindowFinal
)

var reasonNames = [numReasons]string{"wait", "idle", "in-flight", "interval", "window_final", "staleness"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", r)
}

// Decision is what Tick returns: whether to commit now and the plan behind
// it.
type Decision struct {
	Commit bool
	Reason Reason
	// Interval is the chosen commit interval T.
	Interval time.Duration
	// PredictedStaleness is S(T), the expected end-to-end staleness of an
	// output under the chosen interval; saturates at the max Duration
	// when the model has no stable interval.
	PredictedStaleness time.Duration
	// Utilization is ρ(T).
	Utilization float64
	// Overloaded reports that the load leaves less headroom than
	// OverloadCommitShare and a persistent backlog larger than one commit
	// cycle's arrivals confirms it (under PolicyFixed the estimate
	// alone), so commits were spaced to take only that share.
	Overloaded bool
	// Draining reports a persistent backlog (one the last two commit
	// cycles did not clear) that takes longer than Interval to drain. Overloaded or draining, the adaptive
	// policy makes no early commits.
	Draining bool
	// Wake is the latest time the runtime should call Tick again if no
	// other observation arrives; ticking more often is harmless.
	Wake time.Time
	// Trace is what the decision rests on: T, predicted and observed
	// p99, λ, s, L, c, blocked time, commit rate and slope.
	Trace Trace
}

// CommitAck reports a finished commit.
type CommitAck struct {
	// Cost is the processing time the commit took away from the record
	// loop (for a commit that blocks the loop, its whole latency). Zero
	// means "blocking": the latency is used.
	Cost time.Duration
}

// Snapshot is the controller's observable state, for metrics. Durations
// that have no measurement yet are zero.
type Snapshot struct {
	Policy   Policy
	Interval time.Duration // chosen T
	// MinSpacing is T_lo, the closest two commits may come (early
	// commits included); equal to Interval under the fixed policy.
	MinSpacing time.Duration
	// PredictedStaleness is S(T); PredictedMaxStaleness is the oldest
	// output's T + L_high + W(T).
	PredictedStaleness    time.Duration
	PredictedMaxStaleness time.Duration
	// PredictedP99 is P99(T), the controller's target quantity (p99.go);
	// ObservedP99 is the output-weighted p99 of staleness over the last
	// 128 commits; Correction the feedback integral (T = optimum·(1−I)).
	PredictedP99 time.Duration
	ObservedP99  time.Duration
	Correction   float64
	// CommitRate is the measured commits/s and LatencySlope the
	// regressed commit latency per commit/s (s); Blocked the record-loop
	// time the last acked commit took.
	CommitRate   float64
	LatencySlope float64
	Blocked      time.Duration
	// ObservedStaleness is an EWMA, over commit acks, of the oldest
	// committed output's staleness (visible time − input time), with its
	// deviation; ObservedMeanStaleness is the EWMA of the per-commit mean;
	// LastObservedStaleness is the latest ack's oldest output.
	ObservedStaleness     time.Duration
	ObservedStalenessDev  time.Duration
	ObservedMeanStaleness time.Duration
	LastObservedStaleness time.Duration
	// Target is the effective staleness target: the tightest among tenants
	// with uncommitted output. TargetFeasible reports whether the
	// predicted max staleness meets it.
	Target         time.Duration
	TargetFeasible bool

	Utilization float64 // ρ(T)
	Load        float64 // λ·(s + commit cost per record)
	Exposure    float64 // rollback exposure h·(T/2+R)
	Overloaded  bool
	Draining    bool    // a backlog beyond the steady queue takes longer than T to drain
	ArrivalRate float64 // λ, records/s
	ServiceTime time.Duration
	CommitCost  time.Duration // per commit (with a size fit: its fixed part)
	// CostPerRecord and LatencyPerRecord are the regressed parts of a
	// commit's cost and latency per record it carries (0 until the sizes
	// have varied enough to tell).
	CostPerRecord     time.Duration
	LatencyPerRecord  time.Duration
	CommitLatency     time.Duration // mean, at the chosen interval
	CommitLatencyDev  time.Duration
	CommitLatencyHigh time.Duration // mean + 4·dev
	HazardRate        float64       // failures per second
	Backlog           int64
	Pending           int64     // outputs not yet in a commit
	Watermark         time.Time // highest watermark observed
	InFlight          bool

	Commits uint64
	Aborts  uint64
	// CommitsBy counts started commits by the Reason that triggered them
	// (a commit started without a Tick decision counts as ReasonInterval).
	CommitsBy map[Reason]uint64
}
