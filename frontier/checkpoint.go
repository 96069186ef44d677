package frontier

import (
	"fmt"
	"math"
	"time"
)

// CheckpointOptions configures a CheckpointScheduler. Zero fields stand for
// their defaults, filled in by EnsureDefaults; Validate checks ranges, as
// for Options.
type CheckpointOptions struct {
	// MeanTimeBetweenFailures is the prior of the hazard rate h.
	// Default 24h. Range [1s, 10000h].
	MeanTimeBetweenFailures time.Duration
	// RestoreTarget bounds the changelog replay a crash may cause
	// (records since the last checkpoint ÷ restore rate). Default 30s.
	// Range [100ms, 24h].
	RestoreTarget time.Duration
	// MinInterval and MaxInterval bound the checkpoint interval.
	// Defaults 1s and 1h. 10ms ≤ Min < Max ≤ 24h.
	MinInterval time.Duration
	MaxInterval time.Duration
	// CostPrior is the checkpoint cost δ assumed until measured.
	// Default 100ms. Range [0, 1h].
	CostPrior time.Duration
	// RestoreRatePrior is the changelog records per second a restore
	// replays, assumed until measured. Default 50000. Range (0, 1e9].
	RestoreRatePrior float64
	// TimeConstant is the EWMA time constant of the changelog write rate.
	// Default 10s. Range [100ms, 24h].
	TimeConstant time.Duration
}

// Checkpoint defaults.
const (
	DefaultRestoreTarget         = 30 * time.Second
	DefaultCheckpointMinInterval = time.Second
	DefaultCheckpointMaxInterval = time.Hour
	DefaultCheckpointCostPrior   = 100 * time.Millisecond
	DefaultRestoreRatePrior      = 50000.0
	DefaultCheckpointTimeConst   = 10 * time.Second
)

// EnsureDefaults sets every zero field to its default and returns o.
func (o *CheckpointOptions) EnsureDefaults() *CheckpointOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.MeanTimeBetweenFailures, DefaultMeanTimeBetweenFailures)
	def(&o.RestoreTarget, DefaultRestoreTarget)
	def(&o.MinInterval, DefaultCheckpointMinInterval)
	def(&o.MaxInterval, DefaultCheckpointMaxInterval)
	def(&o.CostPrior, DefaultCheckpointCostPrior)
	def(&o.TimeConstant, DefaultCheckpointTimeConst)
	if o.RestoreRatePrior == 0 {
		o.RestoreRatePrior = DefaultRestoreRatePrior
	}
	return o
}

// Validate checks every field's range as NewCheckpointScheduler would use
// it, a zero field standing for its default, naming the field and the
// accepted range. It does not modify o.
func (o *CheckpointOptions) Validate() error {
	c := *o
	return c.EnsureDefaults().check()
}

func (o *CheckpointOptions) check() error {
	for _, err := range []error{
		durIn("MeanTimeBetweenFailures", o.MeanTimeBetweenFailures, time.Second, 10000*time.Hour),
		durIn("RestoreTarget", o.RestoreTarget, 100*time.Millisecond, 24*time.Hour),
		durIn("MinInterval", o.MinInterval, 10*time.Millisecond, 24*time.Hour),
		durIn("MaxInterval", o.MaxInterval, o.MinInterval+1, 24*time.Hour),
		durIn("CostPrior", o.CostPrior, 0, time.Hour),
		durIn("TimeConstant", o.TimeConstant, 100*time.Millisecond, 24*time.Hour),
	} {
		if err != nil {
			return err
		}
	}
	if !(o.RestoreRatePrior > 0 && o.RestoreRatePrior <= 1e9) {
		return rangeErr("RestoreRatePrior", o.RestoreRatePrior, "(0, 1e9]")
	}
	return nil
}

// CheckpointReason says why the scheduler decided what it did, and, in a
// decision's Bound, which rule set its interval.
type CheckpointReason uint8

const (
	CheckpointWait     CheckpointReason = iota // not due yet
	CheckpointIdle                             // no changelog writes since the last one
	CheckpointInFlight                         // one is running
	// CheckpointDaly: Daly's interval elapsed (δ < 2M).
	CheckpointDaly
	// CheckpointRestoreTarget: the replay a crash would cause reached the
	// restore target (or the interval is the target's cap).
	CheckpointRestoreTarget
	// CheckpointMTBF: the checkpoint costs at least 2M, and Daly's rule
	// falls back to one checkpoint per mean time between failures.
	CheckpointMTBF
	// CheckpointMinInterval and CheckpointMaxInterval: the interval is
	// the configured bound's.
	CheckpointMinInterval
	CheckpointMaxInterval

	numCheckpointReasons
)

var checkpointReasonNames = [numCheckpointReasons]string{"wait", "idle", "in-flight", "daly", "restore_target", "mtbf", "min_interval", "max_interval"}

func (r CheckpointReason) String() string {
	if r < numCheckpointReasons {
		return checkpointReasonNames[r]
	}
	return fmt.Sprintf("CheckpointReason(%d)", r)
}

// CheckpointDecision is what CheckpointScheduler.Tick returns: whether to
// checkpoint now and the plan behind it, for the runtime to trace.
type CheckpointDecision struct {
	Checkpoint bool
	Reason     CheckpointReason
	// Interval is the planned interval: Daly's, capped by the restore
	// target, within [MinInterval, MaxInterval]; Bound names the rule
	// that set it (daly, mtbf, restore_target, min_interval,
	// max_interval).
	Interval time.Duration
	Bound    CheckpointReason
	// Daly is Daly's interval for Cost and MTBF, unclamped; Cap is the
	// interval after which the replay reaches the restore target at the
	// current write rate (the max Duration with no writes).
	Daly time.Duration
	Cap  time.Duration
	// Cost is δ, the checkpoint cost used (measured, or the prior); MTBF
	// is M = 1/h, the failure hazard's.
	Cost time.Duration
	MTBF time.Duration
	// Replay is the restore time a crash now would cause.
	Replay time.Duration
	// Wake is the latest time to Tick again.
	Wake time.Time
}

// Young returns Young's first-order optimum checkpoint interval
// sqrt(2δM) for a checkpoint cost δ and a mean time between failures M.
func Young(delta, mtbf time.Duration) time.Duration {
	return duration(math.Sqrt(2 * delta.Seconds() * mtbf.Seconds()))
}

// Daly returns Daly's higher-order refinement of Young's rule (J. T. Daly,
// "A higher order estimate of the optimum checkpoint interval for restart
// dumps", FGCS 22(3), 2006): for δ < 2M
//
//	τ = sqrt(2δM)·[1 + 1/3·sqrt(δ/2M) + δ/(18M)] − δ
//
// and τ = M otherwise, for a checkpoint cost δ and a mean time between
// failures M. Young's rule assumes failures are rare within an interval and
// ignores the time the checkpoints themselves take; Daly's keeps the next
// terms of the expansion of the expected wall time, which matters when δ is
// not small against M (a costly checkpoint, a failing node): the interval
// grows by the correction and the checkpoint's own duration is taken off,
// since τ counts compute time between checkpoints.
func Daly(delta, mtbf time.Duration) time.Duration {
	return duration(daly(delta.Seconds(), mtbf.Seconds()))
}

func daly(d, m float64) float64 {
	if d >= 2*m {
		return m
	}
	return math.Sqrt(2*d*m)*(1+math.Sqrt(d/(2*m))/3+d/(18*m)) - d
}

// CheckpointScheduler decides when to make local state durable,
// independently of commits: commits bound output staleness, checkpoints
// bound restore time. Daly's refinement of Young's rule (see Daly) balances
// the checkpoint cost δ, measured, against the expected rework after a
// failure at the hazard rate h = 1/M, learned (UseHazard shares an
// estimate that outlives the scheduler); the cap keeps the replay a crash
// would cause (changelog records since the last checkpoint ÷ restore rate,
// plus what the checkpoint itself takes to finish) under RestoreTarget,
// whatever Daly says. Like Controller it is deterministic and not safe for
// concurrent use.
type CheckpointScheduler struct {
	opts CheckpointOptions

	writes  flow // changelog write rate
	since   int64
	running int64 // writes covered by the running checkpoint
	cost    meanDev
	restore meanDev // records per second
	hazard  hazard

	inFlight bool
	last     time.Time // start of the last checkpoint (or first time seen)
	primed   bool

	started uint64
	pending CheckpointReason             // the reason of the last Tick's checkpoint
	by      [numCheckpointReasons]uint64 // checkpoints started, by reason
}

// NewCheckpointScheduler validates opts and returns a scheduler.
func NewCheckpointScheduler(opts CheckpointOptions) (*CheckpointScheduler, error) {
	if err := opts.EnsureDefaults().check(); err != nil {
		return nil, err
	}
	return &CheckpointScheduler{
		opts:    opts,
		pending: CheckpointDaly,
		writes:  newFlow(opts.TimeConstant, opts.TimeConstant/50),
		hazard:  newHazard(opts.MeanTimeBetweenFailures),
	}, nil
}

func (s *CheckpointScheduler) at(now time.Time) time.Time {
	if !s.primed {
		s.last, s.primed = now, true
	}
	s.hazard.advance(now)
	return now
}

// ObserveChangelogWrites records n changelog records written (committed
// state changes a restore would have to replay).
func (s *CheckpointScheduler) ObserveChangelogWrites(now time.Time, n int) {
	s.at(now)
	s.writes.add(now, n, 0)
	s.since += int64(n)
}

// ObserveCheckpointStarted records that a checkpoint began; it covers every
// write observed so far.
func (s *CheckpointScheduler) ObserveCheckpointStarted(now time.Time) {
	s.at(now)
	s.inFlight, s.last = true, now
	s.running, s.since = s.since, 0
	s.started++
	s.by[s.pending]++
	s.pending = CheckpointDaly
}

// ObserveCheckpointFinished records that the running checkpoint completed,
// having cost cost (its duration, or the I/O time it took).
func (s *CheckpointScheduler) ObserveCheckpointFinished(now time.Time, cost time.Duration) {
	s.at(now)
	if !s.inFlight {
		return
	}
	s.cost.observe(cost.Seconds())
	s.inFlight, s.running = false, 0
}

// ObserveCheckpointFailed records that the running checkpoint failed: the
// writes it covered still need replaying.
func (s *CheckpointScheduler) ObserveCheckpointFailed(now time.Time) {
	s.at(now)
	if !s.inFlight {
		return
	}
	s.since += s.running
	s.inFlight, s.running = false, 0
}

// ObserveRestore records a restore that replayed records in d, measuring the
// restore rate.
func (s *CheckpointScheduler) ObserveRestore(records int64, d time.Duration) {
	if records > 0 && d > 0 {
		s.restore.observe(float64(records) / d.Seconds())
	}
}

// ObserveFailure records a crash (reported on restart).
func (s *CheckpointScheduler) ObserveFailure(now time.Time) {
	s.at(now)
	s.hazard.fail(now)
}

func (s *CheckpointScheduler) delta() float64 {
	if s.cost.n > 0 {
		return s.cost.mean
	}
	return s.opts.CostPrior.Seconds()
}

func (s *CheckpointScheduler) restoreRate() float64 {
	if s.restore.n > 0 && s.restore.mean > 0 {
		return s.restore.mean
	}
	return s.opts.RestoreRatePrior
}

// Young returns Young's interval sqrt(2δM) for the current estimates,
// unclamped.
func (s *CheckpointScheduler) Young() time.Duration {
	return duration(math.Sqrt(2 * s.delta() / s.hazard.rate()))
}

// Daly returns Daly's interval (see the function Daly) for the current
// estimates, unclamped.
func (s *CheckpointScheduler) Daly() time.Duration {
	return duration(daly(s.delta(), 1/s.hazard.rate()))
}

// ExpectedRestore is R: the mean replay time a crash at a uniformly random
// moment would cause, half an interval's writes at the current rate. Feed
// it to Controller.ObserveRestoreTime.
func (s *CheckpointScheduler) ExpectedRestore() time.Duration {
	c, _, _, _ := s.interval()
	return duration(s.writes.rate * c / 2 / s.restoreRate())
}

// interval is the planned interval in seconds, the rule that set it, Daly's
// interval and the restore target's cap (+Inf without writes): Daly's (M
// when δ ≥ 2M), capped at the interval after which the replay reaches the
// target at the current write rate less the checkpoint's own duration,
// within [Min, Max].
func (s *CheckpointScheduler) interval() (c float64, bound CheckpointReason, rule, cp float64) {
	d, m := s.delta(), 1/s.hazard.rate()
	rule = daly(d, m)
	c, bound = rule, CheckpointDaly
	if d >= 2*m {
		bound = CheckpointMTBF
	}
	cp = math.Inf(1)
	if w := s.writes.rate; w > 0 {
		cp = s.opts.RestoreTarget.Seconds()*s.restoreRate()/w - d
		if cp < c {
			c, bound = cp, CheckpointRestoreTarget
		}
	}
	if lo := s.opts.MinInterval.Seconds(); c < lo {
		c, bound = lo, CheckpointMinInterval
	}
	if hi := s.opts.MaxInterval.Seconds(); c > hi {
		c, bound = hi, CheckpointMaxInterval
	}
	return c, bound, rule, cp
}

// CheckpointCounts returns the checkpoints started, in total and by the
// reason of the decision that started them (a checkpoint started without
// a Tick that decided it counts as CheckpointDaly).
func (s *CheckpointScheduler) CheckpointCounts() (total uint64, by map[CheckpointReason]uint64) {
	by = map[CheckpointReason]uint64{}
	for r, n := range s.by {
		if n > 0 {
			by[CheckpointReason(r)] = n
		}
	}
	return s.started, by
}

// Tick decides at now whether to start a checkpoint. A checkpoint it
// decides is due for the decision's interval bound (daly, mtbf,
// restore_target, min_interval, max_interval), or for restore_target when
// the replay reaches the target before the interval elapsed.
func (s *CheckpointScheduler) Tick(now time.Time) CheckpointDecision {
	s.at(now)
	s.writes.advance(now)
	rr := s.restoreRate()
	c, bound, rule, cp := s.interval()
	d := CheckpointDecision{
		Interval: duration(c),
		Bound:    bound,
		Daly:     duration(rule),
		Cap:      duration(cp),
		Cost:     duration(s.delta()),
		MTBF:     duration(1 / s.hazard.rate()),
		Replay:   duration(float64(s.since+s.running) / rr),
	}
	due := s.last.Add(d.Interval)
	d.Wake = due
	s.pending = CheckpointDaly
	switch {
	case s.inFlight:
		d.Reason = CheckpointInFlight
		d.Wake = now.Add(duration(s.delta()))
	case s.since == 0:
		d.Reason = CheckpointIdle
		d.Wake = now.Add(d.Interval)
	default:
		// Writes that land while the checkpoint runs are replayed too.
		replayAtEnd := (float64(s.since) + s.writes.rate*s.delta()) / rr
		minAt := s.last.Add(s.opts.MinInterval)
		switch {
		case !now.Before(due):
			d.Checkpoint, d.Reason, d.Wake = true, bound, now
		case replayAtEnd >= s.opts.RestoreTarget.Seconds() && !now.Before(minAt):
			d.Checkpoint, d.Reason, d.Wake = true, CheckpointRestoreTarget, now
		default:
			d.Reason = CheckpointWait
			// Wake when the replay will reach the target at the current
			// write rate, so a runtime that ticks at Wake does not
			// overshoot it by a tick's worth of writes.
			if w := s.writes.rate; w > 0 {
				left := (s.opts.RestoreTarget.Seconds() - replayAtEnd) * rr / w
				d.Wake = earliest(d.Wake, later(minAt, now.Add(duration(left))))
			}
		}
	}
	if d.Checkpoint {
		s.pending = d.Reason
	}
	return d
}
