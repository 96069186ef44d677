package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// testDuration keeps the suite fast under -race; the relationships below
// hold from a minute of load on.
const testDuration = 2 * time.Minute

func mustResult(t *testing.T, r Report, policy string) Result {
	t.Helper()
	x, ok := r.Result(policy)
	if !ok {
		t.Fatalf("no result for %q", policy)
	}
	if x.Err != nil {
		t.Fatalf("%s: %v", policy, x.Err)
	}
	return x
}

func TestAdaptiveBeatsFixed100msAtLowAndMediumLoad(t *testing.T) {
	for _, tt := range []struct {
		name string
		load float64
	}{
		{"low load", 0.2},
		{"medium load", 0.6},
	} {
		t.Run("adaptive beats fixed-100ms on p99 staleness at "+tt.name, func(t *testing.T) {
			fixed := Fixed(100 * time.Millisecond)
			r := Run(Steady(tt.name, tt.load, testDuration), Adaptive(), fixed)
			a, f := mustResult(t, r, "adaptive"), mustResult(t, r, fixed.Name)
			if a.P99 >= f.P99 {
				t.Errorf("p99 adaptive %v, fixed %v; want adaptive lower\n%v", a.P99, f.P99, r)
			}
			if a.Mean >= f.Mean {
				t.Errorf("mean adaptive %v, fixed %v; want adaptive lower\n%v", a.Mean, f.Mean, r)
			}
			// Both keep up, so neither may lose records.
			if a.Processed < a.Arrived*99/100 || f.Processed < f.Arrived*99/100 {
				t.Errorf("processed %d and %d of %d arrivals; want both to keep up", a.Processed, f.Processed, a.Arrived)
			}
		})
	}
}

func TestOverloadDoesNotCollapseThroughput(t *testing.T) {
	fixed := Fixed(100 * time.Millisecond)
	p := Steady("overload", 1.1, testDuration)
	r := Run(p, Adaptive(), fixed)
	a, f := mustResult(t, r, "adaptive"), mustResult(t, r, fixed.Name)
	if a.Throughput <= f.Throughput {
		t.Errorf("throughput adaptive %.0f, fixed %.0f; want adaptive higher\n%v", a.Throughput, f.Throughput, r)
	}
	// Under overload commits are spaced to take OverloadCommitShare of
	// capacity; allow as much again for estimation lag and slow commits.
	floor := p.Capacity() * (1 - 2*frontier.DefaultOverloadCommitShare)
	if a.Throughput < floor {
		t.Errorf("adaptive throughput %.0f under overload, want ≥ %.0f\n%v", a.Throughput, floor, r)
	}
	if a.OverloadedFraction < 0.5 {
		t.Errorf("adaptive reported overload on %.2f of ticks, want most", a.OverloadedFraction)
	}
}

func TestRampKeepsUpWhereFixed100msFallsBehind(t *testing.T) {
	fixed := Fixed(100 * time.Millisecond)
	// The top of the ramp leaves less headroom than a 100ms timer's
	// commits take (10ms every 100ms), but more than the adaptive floor.
	r := Run(Ramp("ramp", 0.5, 0.95, testDuration), Adaptive(), fixed)
	a, f := mustResult(t, r, "adaptive"), mustResult(t, r, fixed.Name)
	if a.Backlog >= f.Backlog {
		t.Errorf("final backlog adaptive %d, fixed %d; want adaptive smaller\n%v", a.Backlog, f.Backlog, r)
	}
}

func TestFixedPolicyCommitsAtItsInterval(t *testing.T) {
	for _, d := range []time.Duration{100 * time.Millisecond, time.Second} {
		p := Fixed(d)
		x := mustResult(t, Run(Steady("steady", 0.3, testDuration), p), p.Name)
		want := 1 / d.Seconds()
		if x.CommitsPerSec > want || x.CommitsPerSec < 0.95*want {
			t.Errorf("%s: %.2f commits/s, want just under %.2f", p.Name, x.CommitsPerSec, want)
		}
		// Staleness spans about one interval: nothing waits much longer.
		if x.P99 > d+100*time.Millisecond || x.P50 < d/2 {
			t.Errorf("%s: p50 %v p99 %v, want about half and one interval", p.Name, x.P50, x.P99)
		}
	}
}

func TestModelPredictsObservedStaleness(t *testing.T) {
	r := Run(Steady("steady", 0.3, testDuration), DefaultPolicies()...)
	for _, x := range r.Results {
		ratio := x.PredictedMean.Seconds() / x.Mean.Seconds()
		if ratio < 0.67 || ratio > 1.5 {
			t.Errorf("%s: predicted mean staleness %v, observed %v; want within 1.5×", x.Policy, x.PredictedMean, x.Mean)
		}
	}
}

func TestSimulationIsDeterministic(t *testing.T) {
	p := Burst("burst", 0.3, 1.2, 5*time.Second, 30*time.Second, time.Minute)
	a, b := Run(p, DefaultPolicies()...), Run(p, DefaultPolicies()...)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of the same profile differ:\n%v\n%v", a, b)
	}
	p.Seed++
	if c := Run(p, DefaultPolicies()...); reflect.DeepEqual(a.Results, c.Results) {
		t.Fatal("a different seed gave identical results: the seed is not used")
	}
}

func TestInvalidPolicyReportsError(t *testing.T) {
	bad := Policy{Name: "bad", Options: frontier.Options{Policy: "cron"}}
	r := Run(Steady("s", 0.1, time.Second), bad)
	if r.Results[0].Err == nil {
		t.Fatal("invalid options simulated without error")
	}
}

// BenchmarkSimulatedHour measures one policy over an hour of steady load.
func BenchmarkSimulatedHour(b *testing.B) {
	for _, pol := range DefaultPolicies() {
		b.Run(pol.Name, func(b *testing.B) {
			p := Steady("steady", 0.3, time.Hour)
			for b.Loop() {
				Run(p, pol)
			}
		})
	}
}

func TestLookupFindsEveryDefaultProfile(t *testing.T) {
	for _, p := range Profiles(time.Minute) {
		got, ok := Lookup(p.Name, time.Minute)
		if !ok || got.Name != p.Name || got.Duration != time.Minute {
			t.Errorf("Lookup(%q) = %v, %v", p.Name, got.Name, ok)
		}
	}
	if _, ok := Lookup("nope", time.Minute); ok {
		t.Error("Lookup of an unknown profile succeeded")
	}
}

func TestSweepRelationships(t *testing.T) {
	fixed := Fixed(100 * time.Millisecond)
	reports := Sweep([]float64{0.1, 0.5, 0.8, 0.97}, testDuration, Adaptive(), fixed)
	for _, r := range reports {
		a, f := mustResult(t, r, "adaptive"), mustResult(t, r, fixed.Name)
		// Wherever the fixed timer keeps up, so does adaptive; and at
		// 97% load, past what a 100ms timer's commits leave, adaptive
		// still keeps up while fixed falls behind.
		if a.Backlog > f.Backlog+int64(r.Capacity/10) {
			t.Errorf("%s: adaptive ends %d behind, fixed %d", r.Profile, a.Backlog, f.Backlog)
		}
		// The model's own objective is the mean: adaptive must not lose
		// on it where fixed keeps up.
		if f.Backlog < int64(r.Capacity/10) && a.Mean >= f.Mean {
			t.Errorf("%s: mean staleness adaptive %v, fixed %v", r.Profile, a.Mean, f.Mean)
		}
	}
	last := reports[len(reports)-1]
	a, f := mustResult(t, last, "adaptive"), mustResult(t, last, fixed.Name)
	if !(a.Backlog < int64(last.Capacity) && f.Backlog > int64(last.Capacity)) {
		t.Errorf("%s: backlog adaptive %d, fixed %d; want adaptive to keep up and fixed not", last.Profile, a.Backlog, f.Backlog)
	}
	var b strings.Builder
	if err := FormatSweep(&b, reports); err != nil || strings.Count(b.String(), "\n") != len(reports)+1 {
		t.Errorf("FormatSweep wrote %q (%v), want a header and a row per load", b.String(), err)
	}
}
