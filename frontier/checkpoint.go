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

// CheckpointReason says why the scheduler decided what it did.
type CheckpointReason uint8

const (
	CheckpointWait      CheckpointReason = iota // not due yet
	CheckpointIdle                              // no changelog writes since the last one
	CheckpointInFlight                          // one is running
	CheckpointYoung                             // Young's interval elapsed
	CheckpointReplayCap                         // replay would exceed the restore target
)

func (r CheckpointReason) String() string {
	switch r {
	case CheckpointWait:
		return "wait"
	case CheckpointIdle:
		return "idle"
	case CheckpointInFlight:
		return "in-flight"
	case CheckpointYoung:
		return "young"
	case CheckpointReplayCap:
		return "replay-cap"
	}
	return fmt.Sprintf("CheckpointReason(%d)", r)
}

// CheckpointDecision is what CheckpointScheduler.Tick returns.
type CheckpointDecision struct {
	Checkpoint bool
	Reason     CheckpointReason
	// Interval is the planned interval min(C*, cap), C* = sqrt(2δ/h).
	Interval time.Duration
	// Replay is the restore time a crash now would cause.
	Replay time.Duration
	// Wake is the latest time to Tick again.
	Wake time.Time
}

// CheckpointScheduler decides when to make local state durable,
// independently of commits: commits bound output staleness, checkpoints
// bound restore time. Young's rule C* ≈ sqrt(2·δ/h) balances the checkpoint
// cost δ against the expected rework after a failure at hazard rate h; the
// cap keeps the replay a crash would cause (changelog records since the
// last checkpoint ÷ restore rate, plus what the checkpoint itself takes to
// finish) under RestoreTarget, whatever Young says. Like Controller it is
// deterministic and not safe for concurrent use.
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
}

// NewCheckpointScheduler validates opts and returns a scheduler.
func NewCheckpointScheduler(opts CheckpointOptions) (*CheckpointScheduler, error) {
	if err := opts.EnsureDefaults().check(); err != nil {
		return nil, err
	}
	return &CheckpointScheduler{
		opts:   opts,
		writes: newFlow(opts.TimeConstant, opts.TimeConstant/50),
		hazard: newHazard(opts.MeanTimeBetweenFailures),
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

// Young returns C* = sqrt(2δ/h) for the current estimates, unclamped.
func (s *CheckpointScheduler) Young() time.Duration {
	return duration(math.Sqrt(2 * s.delta() / s.hazard.rate()))
}

// ExpectedRestore is R: the mean replay time a crash at a uniformly random
// moment would cause, half an interval's writes at the current rate. Feed
// it to Controller.ObserveRestoreTime.
func (s *CheckpointScheduler) ExpectedRestore() time.Duration {
	c := s.interval()
	return duration(s.writes.rate * c / 2 / s.restoreRate())
}

// interval is min(C*, cap) within [Min, Max], in seconds; the cap is the
// interval after which the replay reaches the target at the current write
// rate, less the checkpoint's own duration.
func (s *CheckpointScheduler) interval() float64 {
	c := math.Sqrt(2 * s.delta() / s.hazard.rate())
	if w := s.writes.rate; w > 0 {
		cp := s.opts.RestoreTarget.Seconds()*s.restoreRate()/w - s.delta()
		c = math.Min(c, cp)
	}
	return math.Max(s.opts.MinInterval.Seconds(), math.Min(s.opts.MaxInterval.Seconds(), c))
}

// Tick decides at now whether to start a checkpoint.
func (s *CheckpointScheduler) Tick(now time.Time) CheckpointDecision {
	s.at(now)
	s.writes.advance(now)
	rr := s.restoreRate()
	c := s.interval()
	d := CheckpointDecision{
		Interval: duration(c),
		Replay:   duration(float64(s.since+s.running) / rr),
	}
	due := s.last.Add(d.Interval)
	d.Wake = due
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
			d.Checkpoint, d.Reason, d.Wake = true, CheckpointYoung, now
			if d.Interval < s.Young() && d.Interval > s.opts.MinInterval {
				d.Reason = CheckpointReplayCap // the interval is the cap's
			}
		case replayAtEnd >= s.opts.RestoreTarget.Seconds() && !now.Before(minAt):
			d.Checkpoint, d.Reason, d.Wake = true, CheckpointReplayCap, now
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
	return d
}
