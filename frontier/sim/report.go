package sim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Report is the outcome of one profile under several policies.
type Report struct {
	Profile  string
	Duration time.Duration
	Capacity float64 // records/s without commits
	Results  []Result
}

// Result is one policy's outcome. Staleness is end to end: input arrival
// to the ack of the commit that made the output visible.
type Result struct {
	Policy string
	Err    error // the policy's options did not validate

	Arrived, Processed int64
	Backlog            int64   // unprocessed records at the end
	Throughput         float64 // processed records/s
	Commits            int64
	CommitsPerSec      float64

	Visible                   int64 // outputs made visible
	Mean, P50, P99, P999, Max time.Duration
	Windows                   int64         // windows closed
	WindowP99                 time.Duration // staleness of window final results
	PredictedMean             time.Duration // predicted S(T) at commit decisions, weighted by the outputs each carried, where finite
	PredictedUnstable         float64       // share of committed outputs whose prediction was infinite (ρ ≥ 1)
	OverloadedFraction        float64       // share of ticks that reported overload
	Final                     frontier.Snapshot

	// Good counts the outputs (not window finals) made visible, once
	// each: a crash's lost work counts when redone. Goodput is Good/s.
	Good int64
	// Uncommitted counts the outputs (not finals) produced but not
	// visible at the end.
	Uncommitted int64
	Goodput     float64
	Failures    int
	// CloseVisibleP99 is the p99 of a window final's close→visible time
	// (the watermark closing it to the ack of its commit);
	// FinalsWithin the share of finals visible within the latency of the
	// commit that carried them plus the profile's FetchFloor (they waited
	// neither for an interval nor for a commit in flight);
	// CommitLatencyP50 is the median commit latency.
	CloseVisibleP99  time.Duration
	CommitLatencyP50 time.Duration
	FinalsWithin     float64
	// Phases holds per-phase results when the profile has a PhaseLength.
	Phases []PhaseResult
}

// Result returns the named policy's result.
func (r Report) Result(policy string) (Result, bool) {
	for _, x := range r.Results {
		if x.Policy == policy {
			return x, true
		}
	}
	return Result{}, false
}

// Format writes reports as aligned tables.
func Format(w io.Writer, reports ...Report) error {
	for i, r := range reports {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "profile %s: %v, capacity %.0f rec/s\n", r.Profile, r.Duration, r.Capacity); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "policy\tthroughput/s\tbacklog\tcommits/s\tp50\tp99\tp99.9\tmax\twindow p99\tmean\tpredicted\t")
		for _, x := range r.Results {
			if x.Err != nil {
				fmt.Fprintf(tw, "%s\terror: %v\t\n", x.Policy, x.Err)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				x.Policy, x.Throughput, x.Backlog, x.CommitsPerSec,
				ms(x.P50), ms(x.P99), ms(x.P999), ms(x.Max), ms(x.WindowP99), ms(x.Mean), predicted(x))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// String is the report as a table.
func (r Report) String() string {
	var b strings.Builder
	_ = Format(&b, r)
	return b.String()
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d >= 100*time.Second:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
}

// predicted shows ∞ when the model saw no stable interval for most commits.
func predicted(x Result) string {
	if x.PredictedUnstable > 0.5 {
		return "∞"
	}
	return ms(x.PredictedMean)
}
