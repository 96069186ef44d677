package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// WriteFiles writes tenants.json and tenants.md into dir.
func (r *TenantReport) WriteFiles(dir string) error {
	if err := writeResults(dir, "tenants", r.jsonSafe(), r.Markdown); err != nil {
		return fmt.Errorf("bench tenants: %w", err)
	}
	return nil
}

// jsonSafe is a copy whose NaN rises (no p99 before the burst) are -1,
// which JSON can carry.
func (r *TenantReport) jsonSafe() *TenantReport {
	c := *r
	c.Runs = append([]TenantRun(nil), r.Runs...)
	for i := range c.Runs {
		if math.IsNaN(c.Runs[i].QuietMaxRise) || math.IsInf(c.Runs[i].QuietMaxRise, 0) {
			c.Runs[i].QuietMaxRise = -1
		}
	}
	return &c
}

// Markdown renders one table per run: each tenant's p99 staleness before
// and during the burst and its rise, then the quiet tenants' largest rise.
func (r *TenantReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Tenant burst, run %s on %s (%s), took %s.\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Options, r.Duration)
	fmt.Fprintln(w, "Staleness: receive time at an external read_committed consumer − output timestamp (= the input's send time);")
	fmt.Fprintln(w, "windows by input send time. Outputs/inputs counts every input of the window whose output was seen.")
	for _, run := range r.Runs {
		fmt.Fprintf(w, "\n### Isolation %s (round %d): %s\n\n", run.Mode, run.Round, run.Isolation)
		if run.Error != "" {
			fmt.Fprintf(w, "Error: %s\n\n", strings.ReplaceAll(strings.TrimSpace(run.Error), "\n", " "))
		}
		fmt.Fprintln(w, "| tenant | p99 before ms | p99 during ms | rise % | p50 before ms | p50 during ms | p99 after ms | at-commit p99 before / during ms | outputs/inputs before | outputs/inputs during |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		names := make([]string, 0, len(run.Tenants))
		for t := range run.Tenants {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			ws := run.Tenants[t]
			label := t
			if t == r.Hot {
				label += " (hot)"
			}
			b, d, a := ws[WindowBefore], ws[WindowDuring], ws[WindowAfter]
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %.1f | %.1f | %.1f | %s | %d/%d | %d/%d |\n", label, b.P99, d.P99, pct(Rise(ws)),
				b.P50, d.P50, a.P99, appPair(b.AppP99, d.AppP99), b.Outputs, b.Inputs, d.Outputs, d.Inputs)
		}
		fmt.Fprintf(w, "\nQuiet tenants' max p99 rise: **%s** (target with isolation on: ≤ 10%%). App CPU: %.1f s.\n", pct(run.QuietMaxRise), run.CPUSeconds)
		if run.HotBacklog > 0 {
			fmt.Fprintf(w, "The rate-limited %s still had %d input records to process when the run ended (the drain waited for the other partitions only).\n", r.Hot, run.HotBacklog)
		}
	}
	r.summary(w)
}

// summary renders every run's quiet-tenant figures in one table and, for a
// round with an IsolationApart run, each mode's quiet p99 during the burst
// over the floor's: the part of the burst's cost the app's isolation did
// not remove, apart from the load it puts on the broker and the cores.
func (r *TenantReport) summary(w io.Writer) {
	floor := map[int]float64{}
	for _, run := range r.Runs {
		if run.Mode == IsolationApart && run.Error == "" && run.QuietDuring > 0 {
			floor[run.Round] = run.QuietDuring
		}
	}
	fmt.Fprintf(w, "\n### Summary: quiet tenants (all but %s)\n\n", r.Hot)
	fmt.Fprintln(w, "| round | mode | max p99 before ms | max p99 during ms | max rise | p99 during / floor's (apart) | at-commit max p99 before / during ms |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	for _, run := range r.Runs {
		vs := "n/a"
		if f, ok := floor[run.Round]; ok && run.Error == "" {
			vs = fmt.Sprintf("%.2f", run.QuietDuring/f)
		}
		fmt.Fprintf(w, "| %d | %s | %.1f | %.1f | %s | %s | %s |\n", run.Round, run.Mode, run.QuietBefore, run.QuietDuring, pct(run.QuietMaxRise), vs,
			appPair(run.QuietAppBefore, run.QuietAppDuring))
	}
	fmt.Fprintln(w, "\nAt-commit p99: the app's own per-tenant account (App.TenantStats: one sample per commit, commit time − the oldest input timestamp among the tenant's outputs in it, over its last 1024 commits), the largest the worker reported from 10 s into the window to its end. It holds everything up to the commit but not the read_committed read after it, and it is each commit's worst output, so it runs above the per-output p99: compare it before and during the burst.")
}

// appPair renders at-commit p99s before and during the burst; n/a for a
// window the worker reported none in (a window shorter than appP99Settle,
// as in --quick), never a 0 that reads as perfect freshness.
func appPair(before, during float64) string {
	if before <= 0 && during <= 0 {
		return "n/a"
	}
	return appP99(before) + " / " + appP99(during)
}

func appP99(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", x)
}
