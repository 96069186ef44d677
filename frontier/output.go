package frontier

import (
	"fmt"
	"math"
	"time"
)

// NoOffset and NoWatermark mark a sink partition that has committed
// nothing yet.
const (
	NoOffset    int64 = -1
	NoWatermark int64 = math.MinInt64
)

// Mark is one sink partition's published position: every output up to
// Offset (exclusive: the next offset a consumer would read) is committed,
// and every result for event time ≤ WatermarkMs is among them. Times are
// Kafka record timestamps: milliseconds since the Unix epoch.
type Mark struct {
	Offset      int64 `json:"offset"`
	WatermarkMs int64 `json:"watermark_ms"`
}

// Empty is the mark of a partition that has committed nothing.
var Empty = Mark{Offset: NoOffset, WatermarkMs: NoWatermark}

// Join is the pointwise maximum of two marks. Committed offsets and
// watermarks only move forward, so the maximum of two truthful marks is
// truthful, and join is associative, commutative and idempotent: marks may
// be merged in any order, any number of times, from any publisher.
func (m Mark) Join(o Mark) Mark {
	return Mark{Offset: max(m.Offset, o.Offset), WatermarkMs: max(m.WatermarkMs, o.WatermarkMs)}
}

// Frontier is the published output frontier of one sink topic: a Mark per
// partition. The runtime advances it on each commit ack, serves it over
// HTTP and writes each partition's mark to a compacted topic keyed by sink
// and partition (one key per partition, because different replicas own
// different partitions and must not overwrite each other).
type Frontier struct {
	Sink  string `json:"sink"`
	Marks []Mark `json:"partitions"`
}

// NewFrontier returns the frontier of a sink with partitions partitions, all
// empty.
func NewFrontier(sink string, partitions int) Frontier {
	f := Frontier{Sink: sink, Marks: make([]Mark, partitions)}
	for i := range f.Marks {
		f.Marks[i] = Empty
	}
	return f
}

// Advance joins m into partition p and reports whether the frontier moved.
// A mark behind the current one (a stale publisher, a replayed message) is
// absorbed without effect.
func (f *Frontier) Advance(p int32, m Mark) (bool, error) {
	if p < 0 || int(p) >= len(f.Marks) {
		return false, fmt.Errorf("frontier %q: advance partition %d: out of range [0, %d)", f.Sink, p, len(f.Marks))
	}
	j := f.Marks[p].Join(m)
	moved := j != f.Marks[p]
	f.Marks[p] = j
	return moved, nil
}

// Merge joins every partition of o into f. The sinks must match; a
// frontier with more partitions (the topic grew) extends f.
func (f *Frontier) Merge(o Frontier) error {
	if o.Sink != f.Sink {
		return fmt.Errorf("frontier %q: merge frontier of %q", f.Sink, o.Sink)
	}
	for len(f.Marks) < len(o.Marks) {
		f.Marks = append(f.Marks, Empty)
	}
	for i, m := range o.Marks {
		f.Marks[i] = f.Marks[i].Join(m)
	}
	return nil
}

// WatermarkMs is the sink-wide watermark: the minimum over partitions, since
// a result for a given event time may land in any partition. NoWatermark
// when any partition has none or there are no partitions.
func (f Frontier) WatermarkMs() int64 {
	if len(f.Marks) == 0 {
		return NoWatermark
	}
	w := int64(math.MaxInt64)
	for _, m := range f.Marks {
		w = min(w, m.WatermarkMs)
	}
	return w
}

// Covers answers "are all results up to event time t durable?": true when
// every partition's watermark is at or past t. Watermarks are
// millisecond-granular, so t is rounded up to the next millisecond: a
// watermark of 10ms does not claim to cover 10.5ms.
func (f Frontier) Covers(t time.Time) bool {
	w := f.WatermarkMs()
	if w == NoWatermark {
		return false
	}
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms <= w
}
