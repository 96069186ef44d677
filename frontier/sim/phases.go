package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// PhaseResult is one policy's outcome over one phase of a phased
// profile. Outputs count in the phase their input arrived in, commits in
// the phase they started in, finals in the phase their window closed in.
type PhaseResult struct {
	Phase         int
	Load          float64 // arrivals over capacity
	P50, P99      time.Duration
	Goodput       float64 // outputs made visible per second, once each
	CommitsPerSec float64
	// CloseVisibleP99 and FinalsWithin are as in Result, over the
	// phase's finals (Finals of them).
	CloseVisibleP99 time.Duration
	FinalsWithin    float64
	Finals          int64
}

type phaseAcc struct {
	all, closeVis        *hdrhistogram.Histogram
	arrived, good        int64
	commits              int64
	finals, finalsWithin int64
}

func newPhaseAcc() phaseAcc { return phaseAcc{all: newHist(), closeVis: newHist()} }

func (a *phaseAcc) result(p Profile, k int) PhaseResult {
	sec := p.PhaseLength.Seconds()
	r := PhaseResult{
		Phase: k, Load: float64(a.arrived) / sec / p.Capacity(),
		P50: q(a.all, 50), P99: q(a.all, 99), Goodput: float64(a.good) / sec,
		CommitsPerSec: float64(a.commits) / sec, CloseVisibleP99: q(a.closeVis, 99), Finals: a.finals,
	}
	if a.finals > 0 {
		r.FinalsWithin = float64(a.finalsWithin) / float64(a.finals)
	}
	return r
}

// DefaultPhaseLoads is the load pattern: 10→50→90→50→10% of
// capacity.
func DefaultPhaseLoads() []float64 { return []float64{0.1, 0.5, 0.9, 0.5, 0.1} }

// SweepPolicies are the sweep's policies: adaptive and a fixed grid.
func SweepPolicies() []Policy {
	ps := []Policy{Adaptive()}
	for _, ms := range []int{10, 20, 50, 100, 200} {
		ps = append(ps, Fixed(time.Duration(ms)*time.Millisecond))
	}
	return ps
}

// SweepRateSlope is the broker-saturation slope of the sweep's commit
// model: each commit per second adds 100µs to every commit's latency, so
// 100 commits/s double the 10ms median (the broker on the same two cores
// as the application).
const SweepRateSlope = 100 * time.Microsecond

// Workloads returns the sweep's two phased profiles over loads, phase
// long each: "count" (no windows) and "windowed" (1s tumbling windows,
// event time skewed by up to 5s, 5s grace). Both crash once, half-way
// through the middle phase (the same point for every policy), and model a
// broker whose commit latency rises with the commit rate.
func Workloads(loads []float64, phase time.Duration, seed uint64) []Profile {
	mid := time.Duration(len(loads)/2)*phase + phase/2
	count := Phased("count", loads, phase)
	count.Window = -1
	win := Phased("windowed", loads, phase)
	win.Window, win.Skew, win.Grace = time.Second, 5*time.Second, 5*time.Second
	out := []Profile{count, win}
	for i := range out {
		out[i].Seed = seed
		out[i].Failures = []time.Duration{mid}
		out[i].Commit.RateSlope = SweepRateSlope
	}
	return out
}

// PhaseSweep runs each profile under every policy.
func PhaseSweep(profiles []Profile, policies ...Policy) []Report {
	out := make([]Report, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, Run(p, policies...))
	}
	return out
}

// Verdict compares the adaptive policy with the best fixed interval in
// one phase, by the targets: adaptive p99 ≤ 1.10 × the best fixed
// interval's and goodput ≥ 0.95 × its. The best fixed interval is the one
// with the lowest p99 among those whose goodput is within 5% of the
// phase's highest (an interval that falls behind does not count as best).
type Verdict struct {
	Profile      string
	Phase        int
	Load         float64
	BestFixed    string
	BestP99      time.Duration
	AdaptiveP99  time.Duration
	P99Ratio     float64
	GoodputRatio float64
	OK           bool
}

// Target ratios.
const (
	TargetP99Ratio     = 1.10
	TargetGoodputRatio = 0.95
)

// Compare returns one Verdict per phase of r, comparing the policy named
// adaptive with every other policy (the fixed grid).
func Compare(r Report, adaptive string) []Verdict {
	a, ok := r.Result(adaptive)
	if !ok || a.Err != nil {
		return nil
	}
	var out []Verdict
	for k, ap := range a.Phases {
		var top float64
		for _, x := range r.Results {
			if x.Policy != adaptive && x.Err == nil && k < len(x.Phases) {
				top = max(top, x.Phases[k].Goodput)
			}
		}
		v := Verdict{Profile: r.Profile, Phase: k, Load: ap.Load, AdaptiveP99: ap.P99}
		var best *PhaseResult
		for _, x := range r.Results {
			if x.Policy == adaptive || x.Err != nil || k >= len(x.Phases) {
				continue
			}
			f := x.Phases[k]
			if f.Goodput < TargetGoodputRatio*top {
				continue
			}
			if best == nil || f.P99 < best.P99 {
				best, v.BestFixed = &f, x.Policy
			}
		}
		if best == nil {
			continue
		}
		v.BestP99 = best.P99
		v.P99Ratio = ap.P99.Seconds() / best.P99.Seconds()
		v.GoodputRatio = ap.Goodput / max(best.Goodput, 1e-9)
		v.OK = v.P99Ratio <= TargetP99Ratio && v.GoodputRatio >= TargetGoodputRatio
		out = append(out, v)
	}
	return out
}

// FormatPhases writes, per report, a row per phase and policy (p50/p99
// staleness, goodput, commits/s, close→visible p99, finals visible within
// their commit's latency plus the floor) and then the verdict of each
// phase.
func FormatPhases(w io.Writer, reports []Report, adaptive string) error {
	for i, r := range reports {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "workload %s: %v, capacity %.0f rec/s\n", r.Profile, r.Duration, r.Capacity); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tload\tpolicy\tp50\tp99\tgoodput/s\tcommits/s\tclose→visible p99\tfinals ≤ L+floor\t")
		n := 0
		for _, x := range r.Results {
			n = max(n, len(x.Phases))
		}
		for k := range n {
			for _, x := range r.Results {
				if x.Err != nil || k >= len(x.Phases) {
					continue
				}
				ph := x.Phases[k]
				within := "-"
				if ph.Finals > 0 {
					within = fmt.Sprintf("%.0f%%", 100*ph.FinalsWithin)
				}
				fmt.Fprintf(tw, "%d\t%.0f%%\t%s\t%s\t%s\t%.0f\t%.1f\t%s\t%s\t\n", k+1, 100*ph.Load, x.Policy,
					ms(ph.P50), ms(ph.P99), ph.Goodput, ph.CommitsPerSec, ms(ph.CloseVisibleP99), within)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "phase\tload\tbest fixed\tits p99\t%s p99\tp99 ratio\tgoodput ratio\tverdict\t\n", adaptive)
		for _, v := range Compare(r, adaptive) {
			verdict := "ok"
			if !v.OK {
				verdict = "MISS"
			}
			fmt.Fprintf(tw, "%d\t%.0f%%\t%s\t%s\t%s\t%.2f\t%.3f\t%s\t\n", v.Phase+1, 100*v.Load, v.BestFixed,
				ms(v.BestP99), ms(v.AdaptiveP99), v.P99Ratio, v.GoodputRatio, verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
