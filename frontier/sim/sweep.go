package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Sweep runs a steady profile at each load (a fraction of capacity) for d
// under every policy: where the Profiles show behaviour over time, a sweep
// shows where each policy wins.
func Sweep(loads []float64, d time.Duration, policies ...Policy) []Report {
	out := make([]Report, 0, len(loads))
	for _, l := range loads {
		out = append(out, Run(Steady(fmt.Sprintf("steady-%.2f", l), l, d), policies...))
	}
	return out
}

// DefaultLoads is the sweep the CLI runs: light to just past saturation.
func DefaultLoads() []float64 { return []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.05} }

// FormatSweep writes one row per load with each policy's mean and p99
// staleness, commits per second and throughput share of arrivals.
func FormatSweep(w io.Writer, reports []Report) error {
	if len(reports) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "profile\t")
	for _, x := range reports[0].Results {
		fmt.Fprintf(tw, "%s mean\tp99\tcommits/s\tkept up\t", x.Policy)
	}
	fmt.Fprintln(tw)
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t", r.Profile)
		for _, x := range r.Results {
			kept := float64(x.Processed) / float64(max(1, x.Arrived))
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f%%\t", ms(x.Mean), ms(x.P99), x.CommitsPerSec, 100*kept)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
