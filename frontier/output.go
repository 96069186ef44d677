package frontier

import (
	"fmt"
	"math"
	"sort"
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

// Frontier is the output frontier of one sink topic: a Mark per partition.
// It is what a reader of the frontier topic computes for a sink (see
// SinkStatus.Frontier) and the value version 1 of the topic carried. Every
// partition carries the sink's watermark: any task may write to any
// partition, so a partition's watermark is the minimum over all the tasks
// that feed the sink, which is the sink's.
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
func (f Frontier) Covers(t time.Time) bool { return coversMs(f.WatermarkMs(), t) }

// TaskRef names a task on the frontier topic: a sub-topology and the input
// partition it processes (topology.TaskID, without importing topology, so
// that downstream readers need only this package).
type TaskRef struct {
	SubTopology int32 `json:"sub_topology"`
	Partition   int32 `json:"partition"`
}

func (t TaskRef) String() string { return fmt.Sprintf("%d_%d", t.SubTopology, t.Partition) }

func (t TaskRef) less(o TaskRef) bool {
	if t.SubTopology != o.SubTopology {
		return t.SubTopology < o.SubTopology
	}
	return t.Partition < o.Partition
}

// TaskMark is a task's published output watermark for one sink: every
// record with timestamp ≤ WatermarkMs that the task will ever write to the
// sink is committed. Idle says the task's inputs for the sink have been
// idle for the idle timeout (caught up, no records): its watermark then
// follows the other tasks' instead of its own inputs, and records that
// later arrive on those inputs with timestamps at or below it are late.
// Readers take the minimum over tasks whatever the flag; publishers use it
// to pick which tasks an idle task follows.
type TaskMark struct {
	TaskRef
	WatermarkMs int64 `json:"watermark_ms"`
	Idle        bool  `json:"idle,omitempty"`
}

// Join is the later of two marks of the same task: the greater watermark,
// and on a tie the idle one (a task that moved leaves an active mark behind
// on its old owner's record; the new owner's idle mark at the same
// watermark is the newer news). Like Mark.Join it is associative,
// commutative and idempotent, so marks may be merged from any number of
// publishers in any order.
func (m TaskMark) Join(o TaskMark) TaskMark {
	if o.WatermarkMs > m.WatermarkMs || (o.WatermarkMs == m.WatermarkMs && o.Idle && !m.Idle) {
		return TaskMark{TaskRef: m.TaskRef, WatermarkMs: o.WatermarkMs, Idle: o.Idle}
	}
	return m
}

// Feed is a sub-topology that writes to a sink, with its task count: the
// tasks SubTopology × [0, Tasks) all feed the sink.
type Feed struct {
	SubTopology int32 `json:"sub_topology"`
	Tasks       int32 `json:"tasks"`
}

// Record is one publisher's value for one sink on the frontier topic (key
// "<sink>@<instance>"). Every field is a claim that stays true once the
// transaction that wrote it commits, so readers may take, per field, the
// maximum over all records ever written, and a publisher may absorb another
// publisher's claims into its own record.
type Record struct {
	Sink string `json:"sink"`
	// Offsets, per sink partition: the next offset after the highest
	// committed output the publisher knows of (NoOffset: none).
	Offsets []int64 `json:"offsets"`
	// Feeds are all the tasks of the application that write to the sink,
	// whoever runs them: a reader needs a mark of every one of them.
	Feeds []Feed `json:"feeds,omitempty"`
	// Tasks are the publisher's marks, at most one per task, sorted.
	Tasks []TaskMark `json:"tasks,omitempty"`
	// Legacy holds a version-1 value's per-partition watermarks. Version 1
	// stamped one instance-wide watermark on every partition, ignoring
	// grace periods and inputs without records: readers do not use it for
	// coverage, only the offsets.
	Legacy []int64 `json:"legacy_watermarks,omitempty"`
}

// Mark returns the publisher's mark for task.
func (r Record) Mark(task TaskRef) (TaskMark, bool) {
	i := sort.Search(len(r.Tasks), func(i int) bool { return !r.Tasks[i].TaskRef.less(task) })
	if i < len(r.Tasks) && r.Tasks[i].TaskRef == task {
		return r.Tasks[i], true
	}
	return TaskMark{}, false
}

// WithMark returns r with m joined into its marks, keeping them sorted. r's
// Tasks are not modified in place.
func (r Record) WithMark(m TaskMark) Record {
	i := sort.Search(len(r.Tasks), func(i int) bool { return !r.Tasks[i].TaskRef.less(m.TaskRef) })
	tasks := make([]TaskMark, 0, len(r.Tasks)+1)
	tasks = append(tasks, r.Tasks[:i]...)
	if i < len(r.Tasks) && r.Tasks[i].TaskRef == m.TaskRef {
		tasks = append(tasks, r.Tasks[i].Join(m))
		i++
	} else {
		tasks = append(tasks, m)
	}
	r.Tasks = append(tasks, r.Tasks[i:]...)
	return r
}

// SetMark returns r with m as its mark for m's task, replacing any (a
// publisher's own task: its idleness is current, not joined). r's Tasks are
// not modified in place.
func (r Record) SetMark(m TaskMark) Record {
	i := sort.Search(len(r.Tasks), func(i int) bool { return !r.Tasks[i].TaskRef.less(m.TaskRef) })
	tasks := make([]TaskMark, 0, len(r.Tasks)+1)
	tasks = append(tasks, r.Tasks[:i]...)
	tasks = append(tasks, m)
	if i < len(r.Tasks) && r.Tasks[i].TaskRef == m.TaskRef {
		i++
	}
	r.Tasks = append(tasks, r.Tasks[i:]...)
	return r
}

// Absorb returns r with every claim of o (a record for the same sink)
// joined in: offsets and marks. Feeds stay r's. A publisher absorbs
// a departed publisher's record before deleting it, so no claim is lost.
func (r Record) Absorb(o Record) Record {
	offs := append([]int64(nil), r.Offsets...)
	for len(offs) < len(o.Offsets) {
		offs = append(offs, NoOffset)
	}
	for i, off := range o.Offsets {
		offs[i] = max(offs[i], off)
	}
	r.Offsets = offs
	for _, m := range o.Tasks {
		r = r.WithMark(m)
	}
	return r
}

// View is the state of the frontier topic as a reader folds it: the latest
// record of every key (what compaction keeps), and the frontier of every
// sink derived from them. It does no I/O; package frontier/watch feeds it
// from the topic.
type View struct {
	recs map[string]viewRecord
	seq  uint64
}

type viewRecord struct {
	rec Record
	seq uint64 // order of arrival: the latest record's feeds win
}

// NewView returns an empty view.
func NewView() *View { return &View{recs: map[string]viewRecord{}} }

// Put sets key's record, as a newer record on the topic does.
func (v *View) Put(key string, r Record) {
	v.seq++
	v.recs[key] = viewRecord{rec: r, seq: v.seq}
}

// Delete removes key, as a tombstone does.
func (v *View) Delete(key string) { delete(v.recs, key) }

// Apply folds one record of the topic into the view: a nil value is a
// tombstone. An undecodable value is reported and leaves the view as it
// was.
func (v *View) Apply(key, value []byte) error {
	if value == nil {
		v.Delete(string(key))
		return nil
	}
	var r Record
	if err := r.UnmarshalBinary(value); err != nil {
		return fmt.Errorf("frontier record %q: %w", key, err)
	}
	v.Put(string(key), r)
	return nil
}

// Clone returns an independent copy. Records are values whose slices are
// never modified in place, so they are shared.
func (v *View) Clone() *View {
	c := &View{recs: make(map[string]viewRecord, len(v.recs)), seq: v.seq}
	for k, r := range v.recs {
		c.recs[k] = r
	}
	return c
}

// Record returns key's record.
func (v *View) Record(key string) (Record, bool) {
	r, ok := v.recs[key]
	return r.rec, ok
}

// Keys returns the keys of the view, sorted.
func (v *View) Keys() []string {
	out := make([]string, 0, len(v.recs))
	for k := range v.recs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Sinks returns the sinks that records name, sorted.
func (v *View) Sinks() []string {
	seen := map[string]bool{}
	for _, r := range v.recs {
		seen[r.rec.Sink] = true
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// maxListed bounds the tasks a SinkStatus lists as uncovered.
const maxListed = 64

// SinkStatus is the application's output frontier of one sink as the
// records of the frontier topic establish it.
type SinkStatus struct {
	Sink string `json:"sink"`
	// Partitions: per sink partition, the highest committed offset any
	// record names, and the sink watermark.
	Partitions []Mark `json:"partitions"`
	// WatermarkMs: every output with timestamp ≤ WatermarkMs that the
	// application will write to the sink is committed (NoWatermark: no
	// claim). It is the minimum over the feeding tasks of their joined
	// marks, and NoWatermark while a feeding task has no mark at all.
	// Marks only grow and departed publishers' marks are absorbed before
	// their records are deleted, so it never goes back.
	WatermarkMs int64 `json:"watermark_ms"`
	// Tasks are the joined marks of the feeding tasks, sorted.
	Tasks []TaskMark `json:"tasks"`
	// Uncovered lists (up to 64 of) the UncoveredCount feeding tasks that no
	// record has a mark for: while there are any, nothing is covered.
	Uncovered      []TaskRef `json:"uncovered,omitempty"`
	UncoveredCount int       `json:"uncovered_count,omitempty"`
	// Keys are the records the status derives from, sorted.
	Keys []string `json:"keys"`
}

// Covers answers "are all results up to event time t durable?", with t
// rounded up to the next millisecond as Frontier.Covers does.
func (s SinkStatus) Covers(t time.Time) bool { return coversMs(s.WatermarkMs, t) }

// Frontier returns the status as a Frontier: a mark per partition.
func (s SinkStatus) Frontier() Frontier {
	return Frontier{Sink: s.Sink, Marks: append([]Mark(nil), s.Partitions...)}
}

// Sink derives the frontier of sink from the view's records; false when no
// record names the sink.
func (v *View) Sink(sink string) (SinkStatus, bool) {
	st := SinkStatus{Sink: sink, WatermarkMs: NoWatermark}
	var feeds []Feed
	var feedSeq uint64
	marks := map[TaskRef]TaskMark{}
	var offsets []int64
	for key, vr := range v.recs {
		r := vr.rec
		if r.Sink != sink {
			continue
		}
		st.Keys = append(st.Keys, key)
		for len(offsets) < len(r.Offsets) {
			offsets = append(offsets, NoOffset)
		}
		for i, off := range r.Offsets {
			offsets[i] = max(offsets[i], off)
		}
		if r.Legacy != nil {
			continue
		}
		if len(r.Feeds) > 0 && vr.seq > feedSeq {
			feeds, feedSeq = r.Feeds, vr.seq
		}
		for _, m := range r.Tasks {
			if old, ok := marks[m.TaskRef]; ok {
				m = old.Join(m)
			}
			marks[m.TaskRef] = m
		}
	}
	if len(st.Keys) == 0 {
		return SinkStatus{}, false
	}
	sort.Strings(st.Keys)
	wm := int64(math.MaxInt64)
	for _, f := range feeds {
		for p := int32(0); p < f.Tasks; p++ {
			task := TaskRef{SubTopology: f.SubTopology, Partition: p}
			m, ok := marks[task]
			if !ok {
				st.UncoveredCount++
				if len(st.Uncovered) < maxListed {
					st.Uncovered = append(st.Uncovered, task)
				}
				continue
			}
			st.Tasks = append(st.Tasks, m)
			wm = min(wm, m.WatermarkMs)
		}
	}
	if len(feeds) > 0 && st.UncoveredCount == 0 {
		st.WatermarkMs = wm
	}
	st.Partitions = make([]Mark, len(offsets))
	for i, off := range offsets {
		st.Partitions[i] = Mark{Offset: off, WatermarkMs: st.WatermarkMs}
	}
	return st, true
}

func coversMs(w int64, t time.Time) bool {
	if w == NoWatermark {
		return false
	}
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms <= w
}
