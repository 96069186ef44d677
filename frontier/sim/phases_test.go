package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sweepSeed is the seed of the phase sweep tests: TIDEMARK_SIM_SEED, or 1.
// It is logged, so a failure can be replayed.
func sweepSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(1)
	if v := os.Getenv("TIDEMARK_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TIDEMARK_SIM_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (set TIDEMARK_SIM_SEED to replay another)", seed)
	return seed
}

// sweepPhase is long enough that a phase's p99 rests on thousands of
// outputs beyond it even at 10% load; at 30s the p99 at light load sits on
// a handful of slow commits and the ratios are mostly noise.
const sweepPhase = time.Minute

// TestPhaseSweepTargets checks the targets in the simulator: in
// every phase of both workloads (10→50→90→50→10% of capacity, one crash
// in the 90% phase, event time skewed by up to 5s in the windowed one, a
// broker whose latency rises with the commit rate), adaptive p99 ≤ 1.10 ×
// the best fixed interval's and goodput ≥ 0.95 × its; and every fixed
// interval misses that somewhere.
func TestPhaseSweepTargets(t *testing.T) {
	seed := sweepSeed(t)
	reports := PhaseSweep(Workloads(DefaultPhaseLoads(), sweepPhase, seed), SweepPolicies()...)
	var table strings.Builder
	if err := FormatPhases(&table, reports, "adaptive"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	for _, r := range reports {
		vs := Compare(r, "adaptive")
		if len(vs) != len(DefaultPhaseLoads()) {
			t.Fatalf("%s: %d verdicts, want one per phase", r.Profile, len(vs))
		}
		for _, v := range vs {
			if !v.OK {
				t.Errorf("%s phase %d (%.0f%%): adaptive p99 %v = %.2f × best fixed (%s, %v), goodput %.3f ×; want ≤ %.2f and ≥ %.2f",
					r.Profile, v.Phase+1, 100*v.Load, v.AdaptiveP99, v.P99Ratio, v.BestFixed, v.BestP99, v.GoodputRatio, TargetP99Ratio, TargetGoodputRatio)
			}
		}
		// Every fixed interval misses the same targets against the best of
		// the others (adaptive included) in some phase.
		for _, f := range r.Results {
			if f.Policy == "adaptive" {
				continue
			}
			missed := false
			for k, fp := range f.Phases {
				var best time.Duration
				var top float64
				for _, o := range r.Results {
					if o.Policy == f.Policy {
						continue
					}
					top = max(top, o.Phases[k].Goodput)
					if best == 0 || o.Phases[k].P99 < best {
						best = o.Phases[k].P99
					}
				}
				if fp.P99.Seconds() > TargetP99Ratio*best.Seconds() || fp.Goodput < TargetGoodputRatio*top {
					missed = true
				}
			}
			if !missed {
				t.Errorf("%s: %s meets the targets in every phase; the sweep does not discriminate", r.Profile, f.Policy)
			}
		}
	}
}

// TestCrashLosesNothing: a crash loses the outputs not yet visible, and
// redoing them makes each visible exactly once: every arrival is either
// visible once, produced but not yet committed, or still queued at the
// end.
func TestCrashLosesNothing(t *testing.T) {
	p := Phased("crash", []float64{0.3, 0.6, 0.3}, 20*time.Second)
	p.Failures = []time.Duration{15 * time.Second, 31 * time.Second}
	p.Window = -1
	r := Run(p, SweepPolicies()...)
	for _, x := range r.Results {
		if x.Failures != 2 {
			t.Errorf("%s: %d failures, want 2", x.Policy, x.Failures)
		}
		if x.Good+x.Uncommitted+x.Backlog != x.Arrived || x.Processed != x.Arrived-x.Backlog {
			t.Errorf("%s: %d visible + %d uncommitted + %d queued ≠ %d arrived (processed %d)", x.Policy, x.Good, x.Uncommitted, x.Backlog, x.Arrived, x.Processed)
		}
	}
}

func TestPhaseSweepIsDeterministic(t *testing.T) {
	ws := Workloads([]float64{0.2, 0.8}, 10*time.Second, 7)
	a := FormatString(t, PhaseSweep(ws, SweepPolicies()...))
	b := FormatString(t, PhaseSweep(ws, SweepPolicies()...))
	if a != b {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
}

func FormatString(t *testing.T, reports []Report) string {
	t.Helper()
	var b strings.Builder
	if err := FormatPhases(&b, reports, "adaptive"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWindowFinalsVisibleWithinOneCommit: under the adaptive policy a
// window's final result is visible within the latency of the commit that
// carries it (plus the fetch floor) of the watermark closing it, for at
// least 95% of finals in every phase but the crash's (whose finals wait
// for the restore): window_final commits start at once. A fixed interval
// shows what that is worth.
//
// The sweep's commits block the record loop, as the runtime's do today,
// so no window closes while a commit is in flight. With commits off the
// loop (issue 12 item 1) they do; the test logs that case (a fifth of each
// commit blocking) without asserting it: there a commit is in flight most
// of the time at light load and a final closing under it waits for its
// end first (see the report of this change).
func TestWindowFinalsVisibleWithinOneCommit(t *testing.T) {
	seed := sweepSeed(t)
	win := Workloads(DefaultPhaseLoads(), sweepPhase, seed)[1]
	crash := int(win.Failures[0] / win.PhaseLength)
	fixed := Fixed(100 * time.Millisecond)
	r := Run(win, Adaptive(), fixed)
	a, f := mustResult(t, r, "adaptive"), mustResult(t, r, fixed.Name)
	pipelined := win
	pipelined.Commit.Blocking = 0.2
	pa := mustResult(t, Run(pipelined, Adaptive()), "adaptive")
	for k, ph := range a.Phases {
		t.Logf("phase %d (%.0f%%): %d finals, %.1f%% within their commit's latency, close→visible p99 %v (fixed-100ms: %.1f%%, %v; adaptive with commits off the loop: %.1f%%, %v)",
			k+1, 100*ph.Load, ph.Finals, 100*ph.FinalsWithin, ph.CloseVisibleP99, 100*f.Phases[k].FinalsWithin, f.Phases[k].CloseVisibleP99,
			100*pa.Phases[k].FinalsWithin, pa.Phases[k].CloseVisibleP99)
		if ph.Finals < 50 {
			t.Fatalf("phase %d: only %d finals", k+1, ph.Finals)
		}
		if k != crash && ph.FinalsWithin < 0.95 {
			t.Errorf("phase %d: %.1f%% of finals visible within their commit's latency, want ≥ 95%%", k+1, 100*ph.FinalsWithin)
		}
	}
	if f.FinalsWithin > 0.5 {
		t.Errorf("fixed-100ms: %.1f%% of finals within one commit; the criterion does not discriminate", 100*f.FinalsWithin)
	}
}
