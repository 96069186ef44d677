package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteFiles writes results.json and results.md into dir.
func (r *FailoverReport) WriteFiles(dir string) error {
	return writeResults(dir, "results", r, r.Markdown)
}

// Markdown renders the failover table the README shows.
func (r *FailoverReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Failover run %s on %s, took %s: %d keys × %d B values in %d partitions, input at %.0f records/s, "+
		"two instances per system, SIGKILL of the owner of partition 0. Every member: session timeout %d ms (the broker's "+
		"group.min.session.timeout.ms), heartbeat %d ms. Standby cases: one standby replica (tidemark WithStandbyReplicas(1), "+
		"Streams num.standby.replicas=1); snapshot case: a file:// snapshot store shared by both instances, checkpoints (and so "+
		"snapshots) at least every %d ms, the kill only once every task has a snapshot taken after the load.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Duration, r.Keys, r.ValueBytes, r.Partitions, r.Rate,
		r.SessionTimeoutMs, r.HeartbeatIntervalMs, r.SnapshotIntervalMs)
	fmt.Fprintln(w, "| case | moved partitions | kill → reassigned s | reassigned → first output s | kill → first output s | restored records | snapshots loaded | unmoved p99 steady ms | unmoved p99 takeover ms | ratio | error |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range r.Results {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %d | %s | %s | %s | %s |\n", x.Case, fmtParts(x.Moved),
			fmtNum(x.ReassignedSec, 2), fmtNum(x.TakeoverSec, 2), fmtNum(x.TotalSec, 2), x.RestoredRecords, x.Snapshots,
			fmtNum(x.SteadyP99, 1), fmtNum(x.TakeoverP99, 1), fmtNum(x.P99Ratio(), 2), strings.ReplaceAll(firstLine(x.Error), "|", "/"))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "kill → reassigned: until the coordinator shows a Stable generation without the killed member in which the "+
		"survivor owns its partitions (session expiry + rebalance). reassigned → first output: until an external read_committed "+
		"consumer sees the first output of a moved partition for an input sent after the kill (restore + processing + commit). "+
		"Restored records: changelog records the survivor replayed after the kill (restore listeners). "+
		"Unmoved p99: staleness of the survivor's own partitions' outputs, for inputs sent in steady state before the kill and "+
		"from the kill until %d ms after the first new output; ratio = takeover / steady (target ≤ 1.2).\n", r.AfterMs)
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
