package task

import (
	"maps"

	"github.com/tidemark-streams/tidemark/topology"
)

// Metrics are a task's counters. Dropped records are never silent: every
// record an operator drops (late beyond grace, invalid timestamp, skipped
// tombstone, undecodable, null key) is counted by reason and by operator,
// and the service (processor.App) exports the counts per task, operator
// and reason (tidemark_dropped_records_total) and logs them, rate-limited.
type Metrics struct {
	Processed    int64
	Emitted      int64
	Punctuations int64
	// WindowsClosed counts final results of closed windows and sessions
	// emitted by emit-final operators.
	WindowsClosed int64
	// Dropped counts dropped records by reason.
	Dropped map[topology.DropReason]int64
	// DroppedByNode counts dropped records by operator name.
	DroppedByNode map[string]int64
	// DroppedBy counts dropped records by operator and reason.
	DroppedBy map[DropKey]int64
}

// DropKey names where and why records were dropped.
type DropKey struct {
	Node   string
	Reason topology.DropReason
}

func newMetrics() Metrics {
	return Metrics{Dropped: map[topology.DropReason]int64{}, DroppedByNode: map[string]int64{}, DroppedBy: map[DropKey]int64{}}
}

func (m *Metrics) record(node string, reason topology.DropReason) {
	m.Dropped[reason]++
	m.DroppedByNode[node]++
	m.DroppedBy[DropKey{Node: node, Reason: reason}]++
}

func (m Metrics) clone() Metrics {
	m.Dropped = maps.Clone(m.Dropped)
	m.DroppedByNode = maps.Clone(m.DroppedByNode)
	m.DroppedBy = maps.Clone(m.DroppedBy)
	return m
}

// Add sums two snapshots, for totals over tasks.
func (m Metrics) Add(o Metrics) Metrics {
	out := newMetrics()
	out.Processed, out.Emitted, out.Punctuations, out.WindowsClosed = m.Processed, m.Emitted, m.Punctuations, m.WindowsClosed
	out.Processed += o.Processed
	out.Emitted += o.Emitted
	out.Punctuations += o.Punctuations
	out.WindowsClosed += o.WindowsClosed
	for _, s := range []Metrics{m, o} {
		for k, v := range s.Dropped {
			out.Dropped[k] += v
		}
		for k, v := range s.DroppedByNode {
			out.DroppedByNode[k] += v
		}
		for k, v := range s.DroppedBy {
			out.DroppedBy[k] += v
		}
	}
	return out
}

// TotalDropped is the number of dropped records for every reason.
func (m Metrics) TotalDropped() int64 {
	var n int64
	for _, v := range m.Dropped {
		n += v
	}
	return n
}
