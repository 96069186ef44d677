package processor

import (
	"maps"

	"github.com/tidemark-streams/tidemark/topology"
)

// Metrics are a task's counters. Dropped records are never silent: every
// record an operator drops (late beyond grace, invalid timestamp, skipped
// tombstone) is counted by reason and by operator.
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
}

func newMetrics() Metrics {
	return Metrics{Dropped: map[topology.DropReason]int64{}, DroppedByNode: map[string]int64{}}
}

func (m *Metrics) record(node string, reason topology.DropReason) {
	m.Dropped[reason]++
	m.DroppedByNode[node]++
}

func (m Metrics) clone() Metrics {
	m.Dropped = maps.Clone(m.Dropped)
	m.DroppedByNode = maps.Clone(m.DroppedByNode)
	return m
}

// Add sums two snapshots, for totals over tasks.
func (m Metrics) Add(o Metrics) Metrics {
	out := m.clone()
	if out.Dropped == nil {
		out = newMetrics()
		out.Processed, out.Emitted, out.Punctuations, out.WindowsClosed = m.Processed, m.Emitted, m.Punctuations, m.WindowsClosed
	}
	out.Processed += o.Processed
	out.Emitted += o.Emitted
	out.Punctuations += o.Punctuations
	out.WindowsClosed += o.WindowsClosed
	for k, v := range o.Dropped {
		out.Dropped[k] += v
	}
	for k, v := range o.DroppedByNode {
		out.DroppedByNode[k] += v
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
