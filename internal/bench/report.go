package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// WriteFiles writes results.json, results.md and one staleness-vs-rate SVG
// per swept workload into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := writeResults(dir, "results", r, r.Markdown); err != nil {
		return err
	}
	for _, w := range r.sweptWorkloads() {
		var svg strings.Builder
		r.SVG(&svg, w)
		if err := os.WriteFile(filepath.Join(dir, "staleness-"+w+".svg"), []byte(svg.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Markdown renders the tables the README shows.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Run %s on %s (%s), took %s.\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Options, r.Duration)
	fmt.Fprintln(w, "Max throughput (pre-produced input):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | system | records/s | CPU s | peak RSS MiB | error |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|")
	for _, x := range r.phase("max") {
		fmt.Fprintf(w, "| %s | %s | %.0f | %.1f | %.0f | %s |\n", x.Workload, x.System, x.Throughput, x.CPUSeconds, x.PeakRSSMiB, x.Error)
	}
	if rs := r.phase("rate"); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "End-to-end staleness at fixed input rates (external read_committed consumer):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| workload | rate/s | system | p50 ms | p99 ms | p99.9 ms | outputs | CPU s | error |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---|")
		for _, x := range rs {
			fmt.Fprintf(w, "| %s | %.0f | %s | %.1f | %.1f | %.1f | %d | %.1f | %s |\n", x.Workload, x.Rate, x.System, x.P50, x.P99, x.P999, x.Outputs, x.CPUSeconds, x.Error)
		}
	}
	if rs := r.phase("resume"); len(rs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| resume after SIGKILL | system | seconds to first new output | error |")
		fmt.Fprintln(w, "|---|---|---:|---|")
		for _, x := range rs {
			fmt.Fprintf(w, "| %s | %s | %.2f | %s |\n", x.Workload, x.System, x.ResumeSec, x.Error)
		}
	}
}

func (r *Report) phase(p string) []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Phase == p {
			out = append(out, x)
		}
	}
	return out
}

func (r *Report) sweptWorkloads() []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range r.phase("rate") {
		if !seen[x.Workload] {
			seen[x.Workload] = true
			out = append(out, x.Workload)
		}
	}
	return out
}

// SVG plots p99 staleness against input rate, one line per system.
func (r *Report) SVG(w io.Writer, workload string) {
	const W, H, pad = 640.0, 400.0, 60.0
	series := map[string][]Result{}
	var maxX, maxY float64
	for _, x := range r.phase("rate") {
		if x.Workload != workload || x.Error != "" {
			continue
		}
		series[x.System] = append(series[x.System], x)
		maxX, maxY = math.Max(maxX, x.Rate), math.Max(maxY, x.P99)
	}
	if maxX == 0 || maxY == 0 {
		maxX, maxY = 1, 1
	}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	px := func(v float64) float64 { return pad + v/maxX*(W-2*pad) }
	py := func(v float64) float64 { return H - pad - v/maxY*(H-2*pad) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" text-anchor="middle" font-size="14">p99 end-to-end staleness vs input rate: %s</text>`+"\n", W/2, workload)
	fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n",
		pad, H-pad, W-pad, H-pad, pad, pad, pad, H-pad)
	for i := 0; i <= 4; i++ {
		fx, fy := maxX*float64(i)/4, maxY*float64(i)/4
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="middle">%.0f</text>`, px(fx), H-pad+16, fx)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", pad-6, py(fy)+4, fy)
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="middle">input records/s</text><text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">p99 ms</text>`+"\n", W/2, H-16, H/2, H/2)
	for i, n := range names {
		pts := series[n]
		sort.Slice(pts, func(a, b int) bool { return pts[a].Rate < pts[b].Rate })
		var path strings.Builder
		for _, p := range pts {
			fmt.Fprintf(&path, "%.1f,%.1f ", px(p.Rate), py(p.P99))
		}
		c := colors[i%len(colors)]
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.TrimSpace(path.String()))
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", W-pad-150, pad+float64(i)*16, c, n)
	}
	fmt.Fprintln(w, "</svg>")
}
