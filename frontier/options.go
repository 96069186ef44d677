package frontier

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Policy names a commit policy. It is a string so service config files and
// flags can select it.
type Policy string

const (
	// PolicyAdaptive chooses the interval from the staleness cost model
	// and commits early on watermark barriers and staleness targets.
	PolicyAdaptive Policy = "adaptive"
	// PolicyFixed commits every FixedInterval, like Kafka Streams'
	// commit.interval.ms (100 ms under exactly-once), except that pending
	// outputs of a tenant listed in Options.Tenants with a staleness
	// target below FixedInterval commit early when that target is due
	// (no closer than the adaptive floor, and not when overloaded).
	PolicyFixed Policy = "fixed"
)

// Options configures a Controller. The zero value of every field means its
// default, so the zero Options is the adaptive policy with every default
// (DefaultOptions returns it filled in). EnsureDefaults fills the defaults
// in, Validate checks ranges; New does both. Options suit files and flags:
// a service config can hold one and validate it at the edge.
type Options struct {
	// Policy selects the commit policy. Default PolicyAdaptive.
	Policy Policy

	// FixedInterval is the interval of PolicyFixed. Default 100ms, the
	// Kafka Streams exactly-once default. Range [1ms, 1h].
	FixedInterval time.Duration

	// MinInterval (Tmin) and MaxInterval (Tmax) bound the adaptive
	// interval. Defaults 5ms and 5s. 1ms ≤ Tmin < Tmax ≤ 1h.
	MinInterval time.Duration
	MaxInterval time.Duration

	// StalenessTarget is the application's end-to-end staleness target
	// for tenants without their own. Default 1s. Range [1ms, 1h].
	StalenessTarget time.Duration

	// Tenants holds per-tenant staleness targets and rate limits, keyed by
	// the tenant field of the events. Tenants not listed get
	// StalenessTarget and no rate limit, and so do the untenanted outputs:
	// the empty tenant name "" is refused. A listed tenant's target
	// triggers early commits of its pending outputs under both policies
	// (under PolicyFixed only listed tenants do), so a tight target
	// shortens that tenant's staleness while other tenants keep the
	// cadence the policy picks. Early commits also carry every other
	// pending output: a commit is one transaction for the whole task set.
	Tenants map[string]TenantOptions

	// MaxUtilization (ρmax) is the utilisation the adaptive policy never
	// plans above, leaving headroom for bursts and estimation error.
	// The queueing term already charges for utilisation near one, so this
	// is a guard against estimation error, not the main brake.
	// Default 0.98. Range
	// (0, 1).
	MaxUtilization float64

	// MaxCommitShare is the largest share of processing capacity commits
	// may take even when the load leaves more: every commit also costs the
	// brokers (transaction markers on every partition it touched, an
	// offset commit, coordinator writes), which the staleness model does
	// not see. Default 0.5. Range [OverloadCommitShare, 1).
	MaxCommitShare float64

	// OverloadCommitShare is the share of processing capacity commits may
	// still take when the load leaves less headroom than that under
	// MaxUtilization: the overload interval is c / OverloadCommitShare.
	// Default 0.02. Range (0, MaxUtilization).
	OverloadCommitShare float64

	// RateTimeConstant is the EWMA time constant of the arrival-rate and
	// service-time estimators: shorter reacts faster to bursts, longer
	// ignores noise. Default 500ms. Range [10ms, 1h].
	RateTimeConstant time.Duration

	// RateBucket is the shortest period over which counts are aggregated
	// before they enter the EWMA. Default 20ms. Range [1ms,
	// RateTimeConstant].
	RateBucket time.Duration

	// CommitLatencyPrior is the commit latency (start to ack) assumed
	// until one is measured. Default 10ms: on the project's test broker
	// (Kafka 4.1, loopback, 2 cores) a one-record transaction commits in
	// 0.8–1.6 ms at p50 and 23–29 ms at p99 when the machine is idle, and
	// ~26 ms at p50 under load (BenchmarkTxnCommitOneRecord); a service's
	// commit also flushes changelogs. The estimate replaces the prior
	// after a few commits. Range [0, 1m].
	CommitLatencyPrior time.Duration

	// FetchFloor is the delay between a commit's end and a
	// read_committed consumer receiving its outputs (the consumer's fetch
	// wait): it is added to the predicted p99 so that the staleness
	// target compares with what consumers see. It does not move the best
	// interval. Default 0. Range [0, 1m].
	FetchFloor time.Duration

	// P99Tolerance lets the adaptive policy commit less often than the
	// p99 optimum: it takes the longest interval whose objective is
	// within this factor of the optimum's (and whose predicted p99 meets
	// the staleness target). Near its optimum the p99 is flat in T, so a
	// few percent of p99 buys a much lower commit rate, which saves
	// broker CPU on a shared machine that the model cannot see. Default
	// 0.10. Range [0, 1]; 0 means the default.
	P99Tolerance float64

	// MeanTimeBetweenFailures sets the prior of the failure hazard rate
	// h = 1/MTBF, which observed failures and uptime then update.
	// Default 24h. Range [1s, 10000h].
	MeanTimeBetweenFailures time.Duration
}

// TenantOptions are one tenant's isolation settings.
type TenantOptions struct {
	// StalenessTarget overrides Options.StalenessTarget; 0 inherits it.
	StalenessTarget time.Duration
	// Rate is the admitted records per second; 0 means unlimited.
	Rate float64
	// Burst is the token-bucket depth in records. Default max(1, Rate/10)
	// (a tenth of a second of rate) when Rate is set.
	Burst float64
}

// Defaults.
const (
	DefaultFixedInterval           = 100 * time.Millisecond
	DefaultMinInterval             = 5 * time.Millisecond
	DefaultMaxInterval             = 5 * time.Second
	DefaultStalenessTarget         = time.Second
	DefaultMaxUtilization          = 0.98
	DefaultMaxCommitShare          = 0.5
	DefaultOverloadCommitShare     = 0.02
	DefaultRateTimeConstant        = 500 * time.Millisecond
	DefaultRateBucket              = 20 * time.Millisecond
	DefaultCommitLatencyPrior      = 10 * time.Millisecond
	DefaultMeanTimeBetweenFailures = 24 * time.Hour
	DefaultP99Tolerance            = 0.10
)

// ErrInvalidOptions is wrapped by every Validate error (and New's).
var ErrInvalidOptions = errors.New("frontier: invalid options")

func rangeErr(field string, v any, rng string) error {
	return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidOptions, field, v, rng)
}

func durIn(field string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return rangeErr(field, v, fmt.Sprintf("[%v, %v]", lo, hi))
	}
	return nil
}

// DefaultOptions returns the options a zero Options stands for, with every
// default filled in: the adaptive policy.
func DefaultOptions() Options {
	var o Options
	return *o.EnsureDefaults()
}

// EnsureDefaults sets every zero field to its default and returns o. It
// checks nothing (see Validate) and does not modify the caller's Tenants
// map: a tenant's defaults are filled in a copy.
func (o *Options) EnsureDefaults() *Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Policy == "" {
		o.Policy = PolicyAdaptive
	}
	def(&o.FixedInterval, DefaultFixedInterval)
	def(&o.MinInterval, DefaultMinInterval)
	def(&o.MaxInterval, DefaultMaxInterval)
	def(&o.StalenessTarget, DefaultStalenessTarget)
	def(&o.RateTimeConstant, DefaultRateTimeConstant)
	def(&o.RateBucket, DefaultRateBucket)
	def(&o.CommitLatencyPrior, DefaultCommitLatencyPrior)
	def(&o.MeanTimeBetweenFailures, DefaultMeanTimeBetweenFailures)
	if o.MaxUtilization == 0 {
		o.MaxUtilization = DefaultMaxUtilization
	}
	if o.OverloadCommitShare == 0 {
		o.OverloadCommitShare = DefaultOverloadCommitShare
	}
	if o.MaxCommitShare == 0 {
		o.MaxCommitShare = DefaultMaxCommitShare
	}
	if o.P99Tolerance == 0 {
		o.P99Tolerance = DefaultP99Tolerance
	}
	if len(o.Tenants) > 0 {
		ts := make(map[string]TenantOptions, len(o.Tenants))
		for name, t := range o.Tenants {
			if t.StalenessTarget == 0 {
				t.StalenessTarget = o.StalenessTarget
			}
			if t.Rate > 0 && t.Burst == 0 {
				t.Burst = max(1, t.Rate/10)
			}
			ts[name] = t
		}
		o.Tenants = ts
	}
	return o
}

// Validate checks every field's range as New would use it, a zero field
// standing for its default, and returns an error that names the field and
// the accepted range. It does not modify o.
func (o *Options) Validate() error {
	c := *o
	return c.EnsureDefaults().check()
}

// check validates options whose defaults are filled in.
func (o *Options) check() error {
	switch o.Policy {
	case PolicyAdaptive, PolicyFixed:
	default:
		return rangeErr("Policy", o.Policy, fmt.Sprintf("%q or %q", PolicyAdaptive, PolicyFixed))
	}
	checks := []error{
		durIn("FixedInterval", o.FixedInterval, time.Millisecond, time.Hour),
		durIn("MinInterval", o.MinInterval, time.Millisecond, time.Hour),
		durIn("MaxInterval", o.MaxInterval, o.MinInterval+1, time.Hour),
		durIn("StalenessTarget", o.StalenessTarget, time.Millisecond, time.Hour),
		durIn("RateTimeConstant", o.RateTimeConstant, 10*time.Millisecond, time.Hour),
		durIn("RateBucket", o.RateBucket, time.Millisecond, o.RateTimeConstant),
		durIn("CommitLatencyPrior", o.CommitLatencyPrior, 0, time.Minute),
		durIn("FetchFloor", o.FetchFloor, 0, time.Minute),
		durIn("MeanTimeBetweenFailures", o.MeanTimeBetweenFailures, time.Second, 10000*time.Hour),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if !(o.MaxUtilization > 0 && o.MaxUtilization < 1) {
		return rangeErr("MaxUtilization", o.MaxUtilization, "(0, 1)")
	}
	if !(o.OverloadCommitShare > 0 && o.OverloadCommitShare < o.MaxUtilization) {
		return rangeErr("OverloadCommitShare", o.OverloadCommitShare, fmt.Sprintf("(0, %v)", o.MaxUtilization))
	}
	if !(o.MaxCommitShare >= o.OverloadCommitShare && o.MaxCommitShare < 1) {
		return rangeErr("MaxCommitShare", o.MaxCommitShare, fmt.Sprintf("[%v, 1)", o.OverloadCommitShare))
	}
	if !(o.P99Tolerance >= 0 && o.P99Tolerance <= 1) {
		return rangeErr("P99Tolerance", o.P99Tolerance, "[0, 1]")
	}
	if _, ok := o.Tenants[""]; ok {
		// The untenanted outputs (sources without a tenant,
		// punctuations, window finals) always take the default slot and
		// are never charged to a rate: options for "" would do nothing.
		return fmt.Errorf("%w: Tenants[\"\"]: the untenanted outputs have no options of their own; they follow StalenessTarget and are not rate-limited", ErrInvalidOptions)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Tenants)) {
		t := o.Tenants[name]
		field := fmt.Sprintf("Tenants[%q]", name)
		if err := durIn(field+".StalenessTarget", t.StalenessTarget, time.Millisecond, time.Hour); err != nil {
			return err
		}
		// Finite: NaN passes a "< 0" check, and a NaN Burst gives a
		// bucket that never admits (the tenant's partitions held for
		// good), a NaN Rate no limit at all.
		if !(t.Rate >= 0 && !math.IsInf(t.Rate, 1)) {
			return rangeErr(field+".Rate", t.Rate, "a finite number ≥ 0")
		}
		if !(t.Burst >= 0 && !math.IsInf(t.Burst, 1)) {
			return rangeErr(field+".Burst", t.Burst, "a finite number ≥ 0")
		}
	}
	return nil
}
