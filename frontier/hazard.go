package frontier

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// HazardOptions configures a Hazard. Zero fields stand for their defaults,
// filled in by EnsureDefaults; Validate checks ranges, as for Options.
type HazardOptions struct {
	// MeanTimeBetweenFailures is the prior mean time between failures:
	// the estimate a process that has observed nothing starts from.
	// Default 24h. Range [1s, 10000h].
	MeanTimeBetweenFailures time.Duration
	// PriorWeight is how many failures' worth of evidence the prior
	// carries: α = PriorWeight failures over β = PriorWeight·MTBF of
	// uptime. 1 lets the first observed failure roughly double the rate,
	// and no single restart make it absurd. Default 1. Range (0, 1000].
	PriorWeight float64
	// HalfLife is the uptime after which an observation counts half: the
	// estimate forgets, so a hazard that changes (a bad node replaced, a
	// memory leak fixed) is relearned within a few half-lives. Default
	// 720h (30 days of uptime). Range [1m, 100000h].
	HalfLife time.Duration
}

// Hazard defaults.
const (
	DefaultHazardPriorWeight = 1.0
	DefaultHazardHalfLife    = 720 * time.Hour
)

// EnsureDefaults sets every zero field to its default and returns o.
func (o *HazardOptions) EnsureDefaults() *HazardOptions {
	if o.MeanTimeBetweenFailures == 0 {
		o.MeanTimeBetweenFailures = DefaultMeanTimeBetweenFailures
	}
	if o.PriorWeight == 0 {
		o.PriorWeight = DefaultHazardPriorWeight
	}
	if o.HalfLife == 0 {
		o.HalfLife = DefaultHazardHalfLife
	}
	return o
}

// Validate checks every field's range, a zero field standing for its
// default, naming the field and the accepted range. It does not modify o.
func (o *HazardOptions) Validate() error {
	c := *o
	return c.EnsureDefaults().check()
}

func (o *HazardOptions) check() error {
	if err := durIn("MeanTimeBetweenFailures", o.MeanTimeBetweenFailures, time.Second, 10000*time.Hour); err != nil {
		return err
	}
	if err := durIn("HalfLife", o.HalfLife, time.Minute, 100000*time.Hour); err != nil {
		return err
	}
	if !(o.PriorWeight > 0 && o.PriorWeight <= 1000) {
		return rangeErr("PriorWeight", o.PriorWeight, "(0, 1000]")
	}
	return nil
}

// Hazard estimates a process's failure rate h (failures per second of
// uptime) from the failures and the failure-free uptime it observed, for
// the commit controller (rollback exposure) and the checkpoint scheduler
// (Young's and Daly's rules). One Hazard is meant to outlive the sessions
// that feed it, and, saved with State and brought back with Restore, the
// process: a failure is rare, and an estimate that forgot it with the
// session (or the process) that saw it would never learn anything.
//
// The estimate is the posterior mean of a Poisson rate under a Gamma(α, β)
// prior, with exponential forgetting:
//
//	h = (α + F) / (β + E)
//
// where α = PriorWeight and β = PriorWeight·MeanTimeBetweenFailures, and F
// and E are the failures and the uptime observed, each discounted by
// 2^(−u/HalfLife) for the uptime u since it was observed. The prior is not
// discounted: it is the floor the estimate returns to when nothing has
// happened for many half-lives. With a true rate λ and enough uptime, F
// and E tend to λ/k and 1/k (k = ln2/HalfLife), so h tends to
// (α + λ/k)/(β + 1/k): within a few percent of λ when the half-life holds
// many failures, and pulled towards the prior when it holds few.
//
// Only uptime is exposure: time between Advance calls. Time the process
// was down (between a save and the restart that restored it) counts
// neither as exposure nor as forgetting, and the uptime between the last
// save and a crash is lost with the process; the saving cadence bounds it.
//
// A Hazard is deterministic (the clock is passed in) and, unlike the rest
// of the package, safe for concurrent use: the record loop feeds it while
// HTTP handlers read it.
type Hazard struct {
	mu   sync.Mutex
	opts HazardOptions
	k    float64 // ln2 / HalfLife, 1/s

	failures float64 // discounted
	exposure float64 // discounted, seconds
	total    int64   // failures observed, undiscounted
	uptime   float64 // seconds observed, undiscounted

	lastFailure time.Time
	lastCause   string
	last        time.Time
	primed      bool
}

// NewHazard validates opts and returns a Hazard at its prior.
func NewHazard(opts HazardOptions) (*Hazard, error) {
	if err := opts.EnsureDefaults().check(); err != nil {
		return nil, fmt.Errorf("frontier: hazard options: %w", err)
	}
	return &Hazard{opts: opts, k: math.Ln2 / opts.HalfLife.Seconds()}, nil
}

// Options returns the options in effect.
func (h *Hazard) Options() HazardOptions { return h.opts }

// Advance adds the uptime since the previous Advance (or ObserveFailure)
// to the exposure; the first call only starts the clock. Going back in
// time adds nothing.
func (h *Hazard) Advance(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance(now)
}

func (h *Hazard) advance(now time.Time) {
	if h.primed {
		if d := now.Sub(h.last).Seconds(); d > 0 {
			// Discount what was observed by the uptime d, and add d's
			// own exposure, discounted continuously: ∫₀ᵈ e^{−k(d−s)} ds.
			f := math.Exp(-h.k * d)
			h.failures *= f
			h.exposure = h.exposure*f - math.Expm1(-h.k*d)/h.k
			h.uptime += d
		}
	}
	if !h.primed || now.After(h.last) {
		h.last = now
	}
	h.primed = true
}

// Pause stops the clock: the time until the next Advance is not uptime.
// Call it when the process stops feeding the estimate (the App stops).
func (h *Hazard) Pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.primed = false
}

// ObserveFailure records a failure at now: the process (or its session)
// died and its uncommitted work and unsaved state had to be redone. cause
// is kept for display (the latest one).
func (h *Hazard) ObserveFailure(now time.Time, cause string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance(now)
	h.failures++
	h.total++
	h.lastFailure, h.lastCause = now, cause
}

// Rate is the estimated hazard h, failures per second of uptime.
func (h *Hazard) Rate() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rate()
}

func (h *Hazard) rate() float64 {
	w := h.opts.PriorWeight
	return (w + h.failures) / (w*h.opts.MeanTimeBetweenFailures.Seconds() + h.exposure)
}

// MTBF is 1/Rate, the estimated mean uptime between failures.
func (h *Hazard) MTBF() time.Duration { return duration(1 / h.Rate()) }

// HazardState is what a Hazard remembers, in a form to save (it marshals
// to JSON) and Restore in the next process.
type HazardState struct {
	Version int `json:"version"`
	// Failures and ExposureSeconds are the discounted evidence.
	Failures        float64 `json:"failures"`
	ExposureSeconds float64 `json:"exposure_seconds"`
	// FailuresTotal and UptimeSeconds are undiscounted, for display.
	FailuresTotal int64   `json:"failures_total"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	// LastFailure and LastCause describe the latest failure.
	LastFailure time.Time `json:"last_failure,omitzero"`
	LastCause   string    `json:"last_cause,omitempty"`
	// The estimate when saved, and the options it was made under, for a
	// reader of the file; Restore recomputes it under the current options.
	RatePerHour float64 `json:"rate_per_hour"`
	MTBFSeconds float64 `json:"mtbf_seconds"`
	PriorMTBF   float64 `json:"prior_mtbf_seconds"`
	PriorWeight float64 `json:"prior_weight"`
	HalfLife    float64 `json:"half_life_seconds"`
}

// HazardStateVersion is the HazardState format State writes.
const HazardStateVersion = 1

// State returns the estimate's state, to save.
func (h *Hazard) State() HazardState {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rate()
	return HazardState{
		Version: HazardStateVersion, Failures: h.failures, ExposureSeconds: h.exposure,
		FailuresTotal: h.total, UptimeSeconds: h.uptime, LastFailure: h.lastFailure, LastCause: h.lastCause,
		RatePerHour: r * 3600, MTBFSeconds: 1 / r, PriorMTBF: h.opts.MeanTimeBetweenFailures.Seconds(),
		PriorWeight: h.opts.PriorWeight, HalfLife: h.opts.HalfLife.Seconds(),
	}
}

// Restore replaces the observed evidence with st's (saved by State, maybe
// by an earlier process under other options: the prior and half-life in
// effect are h's own). The clock is stopped, as after Pause. A state of
// another version, or with negative or non-finite evidence, is refused and
// h left as it was.
func (h *Hazard) Restore(st HazardState) error {
	if st.Version != HazardStateVersion {
		return fmt.Errorf("frontier: hazard state version %d, want %d", st.Version, HazardStateVersion)
	}
	for _, v := range []float64{st.Failures, st.ExposureSeconds, st.UptimeSeconds} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("frontier: hazard state: bad evidence %v", v)
		}
	}
	if st.FailuresTotal < 0 {
		return fmt.Errorf("frontier: hazard state: %d failures", st.FailuresTotal)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures, h.exposure, h.total, h.uptime = st.Failures, st.ExposureSeconds, st.FailuresTotal, st.UptimeSeconds
	h.lastFailure, h.lastCause = st.LastFailure, st.LastCause
	h.primed = false
	return nil
}

// hazard is how the controller and the checkpoint scheduler hold their
// Hazard: their own, at their options' prior, until UseHazard shares one.
type hazard struct{ *Hazard }

func newHazard(mtbf time.Duration) hazard {
	h, err := NewHazard(HazardOptions{MeanTimeBetweenFailures: mtbf})
	if err != nil {
		// The callers validated mtbf against the same range.
		panic(err)
	}
	return hazard{h}
}

func (h hazard) advance(now time.Time)   { h.Advance(now) }
func (h hazard) fail(now time.Time)      { h.ObserveFailure(now, "") }
func (h hazard) rate() float64           { return h.Rate() }
func (h hazard) shared(s *Hazard) hazard { return hazard{s} }

// UseHazard makes the controller read and feed the shared estimate h
// instead of its own (whose prior was Options.MeanTimeBetweenFailures):
// the App hands every session's controller the one Hazard it keeps across
// sessions and restarts. ObserveFailure then records into h too, so a
// failure should be reported to one of h's users, or to h, only once.
func (c *Controller) UseHazard(h *Hazard) {
	if h != nil {
		c.hazard = c.hazard.shared(h)
	}
}

// UseHazard makes the scheduler read and feed the shared estimate h
// instead of its own (whose prior was
// CheckpointOptions.MeanTimeBetweenFailures); see Controller.UseHazard.
func (s *CheckpointScheduler) UseHazard(h *Hazard) {
	if h != nil {
		s.hazard = s.hazard.shared(h)
	}
}
