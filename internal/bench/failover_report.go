package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteFiles writes results.json and results.md into dir.
func (r *FailoverReport) WriteFiles(dir string) error {
	return writeResults(dir, "results", r, r.Markdown)
}

// Markdown renders the failover tables the README shows: one line per
// case (and table size) with the minimum and median over the repeats, then
// every run.
func (r *FailoverReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Failover run %s on %s, took %s: %d keys (unless the case says otherwise) × %d B values in %d partitions, input at %.0f records/s, "+
		"two instances per system, SIGKILL of the owner of partition 0, every case run %d time(s), interleaved. Every member: session timeout %d ms (the broker's "+
		"group.min.session.timeout.ms), heartbeat %d ms. Standby cases: one standby replica (tidemark WithStandbyReplicas(1), "+
		"Streams num.standby.replicas=1); snapshot cases: a file:// snapshot store shared by both instances, checkpoints (and so "+
		"snapshots) at least every %d ms, the kill only once every task has a snapshot taken after the load. tidemark's members serve HTTP on loopback, which turns "+
		"their peer failure detector on (processor.Config.PeerDeadAfter, default 500 ms), except in the -nodetect case.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Duration, r.Keys, r.ValueBytes, r.Partitions, r.Rate, max(r.Repeats, 1),
		r.SessionTimeoutMs, r.HeartbeatIntervalMs, r.SnapshotIntervalMs)
	fmt.Fprintln(w, "| case | keys | runs | kill → reassigned s (med) | reassigned → first output s min / med | kill → first output s min / med | restored records (med) | unmoved p99 steady ms min / med | unmoved p99 restore window ms min / med | ratio min / med | pooled p99 steady / restore window ms | pooled ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, g := range r.groups() {
		col := func(f func(FailoverResult) float64, prec int) string {
			var xs []float64
			for _, x := range g {
				if x.Error == "" {
					xs = append(xs, f(x))
				}
			}
			if len(xs) == 0 {
				return ""
			}
			slices.Sort(xs)
			return fmt.Sprintf("%.*f / %.*f", prec, xs[0], prec, median(xs))
		}
		med := func(f func(FailoverResult) float64, prec int) string {
			s := col(f, prec)
			if i := strings.Index(s, " / "); i >= 0 {
				return s[i+3:]
			}
			return s
		}
		ok := 0
		for _, x := range g {
			if x.Error == "" {
				ok++
			}
		}
		pooled, pooledRatio := "", ""
		if ps, pt, _ := pooledP99(g); ps > 0 {
			pooled, pooledRatio = fmt.Sprintf("%.0f / %.0f", ps, pt), fmt.Sprintf("%.2f", pt/ps)
		}
		fmt.Fprintf(w, "| %s | %d | %d/%d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", g[0].Case, g[0].Keys, ok, len(g),
			med(func(x FailoverResult) float64 { return x.ReassignedSec }, 2),
			col(func(x FailoverResult) float64 { return x.TakeoverSec }, 2),
			col(func(x FailoverResult) float64 { return x.TotalSec }, 2),
			med(func(x FailoverResult) float64 { return float64(x.RestoredRecords) }, 0),
			col(func(x FailoverResult) float64 { return x.SteadyP99 }, 1),
			col(func(x FailoverResult) float64 { return x.TakeoverP99 }, 1),
			col(func(x FailoverResult) float64 { return x.P99Ratio() }, 2), pooled, pooledRatio)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every run:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | keys | run | moved partitions | input ran s (settled) | kill → reassigned s | reassigned → first output s | kill → first output s | restored records | snapshots loaded | unmoved p99 steady ms | unmoved p99 restore window ms | ratio | error |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range r.Results {
		settled := ""
		if x.SettledSec > 0 {
			settled = fmt.Sprintf("%.0f (%s)", x.SettledSec, map[bool]string{true: "yes", false: "no"}[x.Settled])
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %d | %d | %s | %s | %s | %s |\n", x.Case, x.Keys, x.Repeat, fmtParts(x.Moved), settled,
			fmtNum(x.ReassignedSec, 2), fmtNum(x.TakeoverSec, 2), fmtNum(x.TotalSec, 2), x.RestoredRecords, x.Snapshots,
			fmtNum(x.SteadyP99, 1), fmtNum(x.TakeoverP99, 1), fmtNum(x.P99Ratio(), 2), strings.ReplaceAll(firstLine(x.Error), "|", "/"))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "kill → reassigned: until the coordinator shows a Stable generation without the killed member in which the "+
		"survivor owns its partitions (session expiry + rebalance). reassigned → first output: until an external read_committed "+
		"consumer sees the first output of a moved partition for an input sent after the kill (restore + processing + commit). "+
		"Restored records: changelog records the survivor replayed after the kill (restore listeners). "+
		"Unmoved p99: staleness (receive time − input send time) of the outputs of the survivor's own partitions, for inputs sent in the "+
		"%d ms before the kill (steady) and from reassignment until %d ms after the first new output (restore window); "+
		"ratio = restore window / steady (target ≤ 1.2). The kill waits until the system settled after the table's load: "+
		"the p99 of the last 5 s within 20%% of the 5 s before (\"input ran\" says how long that took; \"no\": it had not settled "+
		"when the wait ran out). Min and median are over the runs without an error. Pooled: the p99 of every such run's outputs of "+
		"the window together (1 ms buckets), and their ratio: a window of one run holds about 3,000 outputs, so a single stall "+
		"of 100 ms sets its p99.\n", r.SteadyWindowMs, r.AfterMs)
}

// groups collects the results by case and size, in first-run order.
func (r *FailoverReport) groups() [][]FailoverResult {
	var out [][]FailoverResult
	idx := map[string]int{}
	for _, x := range r.Results {
		k := fmt.Sprintf("%s/%d", x.Case, x.Keys)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
	}
	return out
}

func fmtNum(v float64, prec int) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func fmtParts(ps []int32) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprint(p))
	}
	return strings.Join(s, ",")
}
