package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// ParityReport is a `bench parity` run: per workload, tidemark's and Kafka
// Streams' results on the same input, and where they differ.
type ParityReport struct {
	Started   time.Time        `json:"started"`
	Machine   string           `json:"machine"`
	Options   string           `json:"options"`
	Seed      uint64           `json:"seed"`
	BaseMs    int64            `json:"base_ms"`
	Workloads []ParityWorkload `json:"workloads"`
	Duration  string           `json:"duration"`
}

// ParityWorkload is one workload's comparison. Entries are keys (count),
// (key, window start)s (windowed), (key, start, end)s (session),
// categories (table-agg) or distinct pairs (joins, null-padded ones
// included); for the counts only the last value of each entry is compared
// (Kafka Streams' record cache emits fewer intermediate updates), for the
// joins the multiset of pairs.
type ParityWorkload struct {
	Workload   string           `json:"workload"`
	RecordsIn  int              `json:"records_in"`
	Tidemark   ParitySide       `json:"tidemark"`
	Streams    ParitySide       `json:"kstreams"`
	Mismatches int              `json:"mismatches"`
	Examples   []ParityMismatch `json:"examples,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// ParitySide is what one system wrote.
type ParitySide struct {
	System  string `json:"system"`
	Outputs int    `json:"outputs"` // records read from its output topic
	Entries int    `json:"entries"` // keys, windows, sessions, categories or pairs
	// Total is the sum of the final counts or the number of pairs (joins).
	Total int64 `json:"total"`
}

// ParityMismatch is one entry the systems disagree on; "-" is a missing
// entry.
type ParityMismatch struct {
	Key      string `json:"key"`
	Tidemark string `json:"tidemark"`
	Streams  string `json:"kstreams"`
}

// parityExamples is how many mismatches a workload keeps.
const parityExamples = 10

// outRecord is one output record as read, key and value as strings.
type outRecord struct{ Key, Value string }

// finalValues is the last value of every key in read order (each key's
// updates are in one partition, in order).
func finalValues(recs []outRecord) map[string]string {
	m := make(map[string]string, len(recs))
	for _, r := range recs {
		m[r.Key] = r.Value
	}
	return m
}

// nonZero drops the entries whose final value is "0": a group whose rows
// all left it. Kafka Streams' record cache merges a row's updates between
// commits, so a category only a superseded value was in is never counted
// there, where tidemark counts it and then subtracts it back to 0; absent
// and 0 are the same empty group.
func nonZero(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "0" {
			delete(m, k)
		}
	}
	return m
}

// pairCounts is the multiset of (key, value) records.
func pairCounts(recs []outRecord) map[string]string {
	n := map[string]int{}
	for _, r := range recs {
		n[r.Key+" → "+r.Value]++
	}
	m := make(map[string]string, len(n))
	for k, c := range n {
		m[k] = fmt.Sprint(c)
	}
	return m
}

// compareEntries fills w's sides' entry counts and its mismatches from the
// two systems' entries (key → final value, or pair → multiplicity).
func compareEntries(w *ParityWorkload, tm, ks map[string]string) {
	w.Tidemark.Entries, w.Streams.Entries = len(tm), len(ks)
	w.Tidemark.Total, w.Streams.Total = sumValues(tm), sumValues(ks)
	var diff []ParityMismatch
	for k, v := range tm {
		if o, ok := ks[k]; !ok || o != v {
			if !ok {
				o = "-"
			}
			diff = append(diff, ParityMismatch{Key: k, Tidemark: v, Streams: o})
		}
	}
	for k, o := range ks {
		if _, ok := tm[k]; !ok {
			diff = append(diff, ParityMismatch{Key: k, Tidemark: "-", Streams: o})
		}
	}
	slices.SortFunc(diff, func(a, b ParityMismatch) int { return cmp.Compare(a.Key, b.Key) })
	w.Mismatches = len(diff)
	w.Examples = diff[:min(len(diff), parityExamples)]
}

// sumValues adds the values that are decimal integers.
func sumValues(m map[string]string) int64 {
	var t int64
	for _, v := range m {
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			t += n
		}
	}
	return t
}

// WriteFiles writes parity.json and parity.md into dir.
func (r *ParityReport) WriteFiles(dir string) error {
	if err := writeResults(dir, "parity", r, r.Markdown); err != nil {
		return fmt.Errorf("bench parity: %w", err)
	}
	return nil
}

// Markdown renders one row per workload and the first mismatches of each.
func (r *ParityReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Results parity with Kafka Streams, run %s on %s (%s, seed %d, base time %d ms), took %s.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Options, r.Seed, r.BaseMs, r.Duration)
	fmt.Fprintln(w, "Entries: keys (count), (key, window start)s (windowed), (key, start, end)s (session), categories (table-agg), distinct pairs (joins); totals: sum of final counts, or pairs.")
	fmt.Fprintln(w, "The counts compare each entry's last value; the joins compare the multiset of pairs, null-padded ones included.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | records in | tidemark outputs | tidemark entries | tidemark total | Kafka Streams outputs | Kafka Streams entries | Kafka Streams total | mismatches |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range r.Workloads {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n", p.Workload, p.RecordsIn,
			p.Tidemark.Outputs, p.Tidemark.Entries, p.Tidemark.Total, p.Streams.Outputs, p.Streams.Entries, p.Streams.Total, p.Mismatches)
	}
	for _, p := range r.Workloads {
		if p.Error != "" {
			fmt.Fprintf(w, "\n%s: error: %s\n", p.Workload, strings.ReplaceAll(strings.TrimSpace(p.Error), "\n", " "))
		}
		if len(p.Examples) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, first %d of %d mismatches:\n\n| key | tidemark | Kafka Streams |\n|---|---|---|\n", p.Workload, len(p.Examples), p.Mismatches)
		for _, m := range p.Examples {
			fmt.Fprintf(w, "| %s | %s | %s |\n", mdCell(m.Key), mdCell(m.Tidemark), mdCell(m.Streams))
		}
	}
}

// mdCell escapes the pipes of a table cell (joined values hold one).
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
