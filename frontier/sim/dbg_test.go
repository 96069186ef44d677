package sim

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestDbg(t *testing.T) {
	if os.Getenv("SIMPRINT") == "" {
		t.Skip()
	}
	for _, slope := range []time.Duration{0, SweepRateSlope, 3 * SweepRateSlope} {
		p := Phased("p", []float64{0.1, 0.5, 0.1, 0.5, 0.1}, 20*time.Second)
		p.Window = -1
		p.Commit.RateSlope = slope
		r := Run(p, Adaptive())
		x := r.Results[0]
		s := x.Final
		fmt.Printf("slope %v: p99 %v commits/s %.1f T %v slope %.5f rate %.1f L %v\n", slope, x.P99, x.CommitsPerSec, s.Interval, s.LatencySlope, s.CommitRate, s.CommitLatency)
		for _, ph := range x.Phases {
			fmt.Printf("   %.0f%% p99 %v commits/s %.1f\n", ph.Load*100, ph.P99, ph.CommitsPerSec)
		}
	}
}
