package task_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

const none = math.MinInt64 // no watermark

// wmTask is a task of sub-topology 0 of topo on partition 0, with the
// output bounds of that sub-topology.
type wmTask struct {
	t      *testing.T
	tk     *task.Task
	bounds topology.SubTopologyBounds
	out    *collected
	idle   map[string]bool
}

func newWMTask(t *testing.T, topo *topology.Topology) *wmTask {
	t.Helper()
	out := &collected{}
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Stores: memstore.NewProvider(), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	b, err := topo.OutputBounds(0)
	if err != nil {
		t.Fatal(err)
	}
	return &wmTask{t: t, tk: tk, bounds: b, out: out, idle: map[string]bool{}}
}

func (w *wmTask) process(topic, key, value string, ts int64) {
	w.t.Helper()
	if err := w.tk.Process(record(topic, 0, 0, key, value, ts)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wmTask) wm(sink string) task.OutputWatermark {
	w.t.Helper()
	wms, err := w.tk.OutputWatermarks(w.bounds, func(topic string) bool { return w.idle[topic] })
	if err != nil {
		w.t.Fatal(err)
	}
	got, ok := wms[sink]
	if !ok {
		w.t.Fatalf("no watermark for sink %q: %v", sink, wms)
	}
	return got
}

// windowCount is in → GroupByKey → windows → count → out.
func windowCount(t *testing.T, w topology.TimeWindows, opts ...topology.WindowOption) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app")
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, w).Count(append([]topology.WindowOption{topology.Named("win")}, opts...)...).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestTumblingWindowCoversExactlyWhenFinal: with a 10 s tumbling window,
// 5 s grace and emit-final, "covers 9 999" must wait for the final result
// of [0, 10 000), which the record that moves the window's clock to 15 000
// emits, and come with it. The instance-wide input watermark the frontier
// used to publish (Task.Watermark) claimed it at stream time 12 000.
func TestTumblingWindowCoversExactlyWhenFinal(t *testing.T) {
	for _, final := range []bool{true, false} {
		name := "emit-final"
		var opts []topology.WindowOption
		if final {
			opts = append(opts, topology.EmitFinal())
		} else {
			name = "every update"
		}
		t.Run(name, func(t *testing.T) {
			w := newWMTask(t, windowCount(t, topology.TumblingWindows(10*time.Second, 5*time.Second), opts...))
			w.process("in", "k", "v", 1000)
			w.process("in", "k", "v", 9000)
			w.process("in", "k", "v", 12000)
			if got := w.wm("out"); got.Ms >= 9999 {
				t.Fatalf("at stream time 12 000 the watermark is %d: it covers 9 999 before [0, 10 000) is final", got.Ms)
			}
			if old := w.tk.Watermark(); old < 9999 {
				t.Fatalf("Task.Watermark() = %d; the old frontier's input watermark was expected to claim 9 999 here", old)
			}
			for _, ts := range []int64{13000, 14000, 14999, 15000, 15001, 19999} {
				before := w.wm("out").Ms
				w.process("in", "k", "v", ts)
				got := w.wm("out")
				closed := ts >= 15000
				if covered := got.Ms >= 9999; covered != closed {
					t.Fatalf("after a record at %d: watermark %d (covers 9 999: %v), want covered exactly once [0, 10 000) closed (%v)", ts, got.Ms, covered, closed)
				}
				if got.Ms < before {
					t.Fatalf("watermark went back from %d to %d", before, got.Ms)
				}
				if got.Ms >= 10000 {
					t.Fatalf("after a record at %d: watermark %d covers [10 000, 20 000), which is open", ts, got.Ms)
				}
				if final && closed != hasFinal(w.out.recs, 0) {
					t.Fatalf("after a record at %d: final result of [0, 10 000) emitted %v, want %v", ts, hasFinal(w.out.recs, 0), closed)
				}
			}
		})
	}
}

// hasFinal reports whether a result of the window of key "k" starting at
// start was emitted: the windowed key is "k", then the start and end as
// 8-byte big-endian integers.
func hasFinal(recs []string, start int64) bool {
	want := fmt.Sprintf(" 6b%016x", start)
	for _, r := range recs {
		if strings.Contains(r, want) {
			return true
		}
	}
	return false
}

// step is one input record (or, with idle set, a change of the inputs
// declared idle) and the watermark expected after it.
type step struct {
	topic, key, value string
	ts                int64
	idle              []string // replace the idle inputs with these (no record)
	setup             bool     // no check after this step
	want              int64
	wantIdle          bool
}

func TestOutputWatermarkFormulas(t *testing.T) {
	build := func(f func(b *topology.Builder)) func(t *testing.T) *topology.Topology {
		return func(t *testing.T) *topology.Topology {
			b := topology.NewBuilder("app")
			f(b)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return topo
		}
	}
	str := serde.String()
	tests := []struct {
		name  string
		topo  func(t *testing.T) *topology.Topology
		steps []step
	}{
		{"no record yet: nothing is covered",
			build(func(b *topology.Builder) { b.Stream("in", str, str).To("out") }),
			[]step{{idle: []string{}, want: none}}},
		{"a stateless path follows its input's stream time, less one (the next record may share it)",
			build(func(b *topology.Builder) {
				b.Stream("in", str, str).MapValues(func(_, v string) string { return strings.ToUpper(v) }).To("out")
			}),
			[]step{{topic: "in", ts: 5000, want: 4999}, {topic: "in", ts: 3000, want: 4999}, {topic: "in", ts: 8000, want: 7999}}},
		{"allowed lateness holds the input back",
			func(t *testing.T) *topology.Topology {
				b := topology.NewBuilder("app", topology.WithAllowedLateness(2*time.Second))
				b.Stream("in", str, str).To("out")
				topo, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				return topo
			},
			[]step{{topic: "in", ts: 5000, want: 2999}}},
		{"hopping window: the first open window's start, minus one",
			func(t *testing.T) *topology.Topology {
				return windowCount(t, topology.HoppingWindows(10*time.Second, 5*time.Second, 0), topology.EmitFinal())
			},
			[]step{
				{topic: "in", key: "k", ts: 1000, want: -1},
				{topic: "in", key: "k", ts: 14999, want: 4999}, // [0,10000) closed at 10 000; [5000,15000) open
				{topic: "in", key: "k", ts: 20000, want: 14999},
			}},
		{"sliding window: clock − grace − difference − 1",
			build(func(b *topology.Builder) {
				g := b.Stream("in", str, str).GroupByKey()
				topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(5*time.Second, time.Second)).
					Count(topology.Named("slide"), topology.EmitFinal()).ToStream().To("out")
			}),
			[]step{{topic: "in", key: "k", ts: 1000, want: 1000 - 1000 - 5000 - 1}, {topic: "in", key: "k", ts: 20000, want: 13999}}},
		{"emit-final session: clock − grace − gap − 1",
			build(func(b *topology.Builder) {
				g := b.Stream("in", str, str).GroupByKey()
				topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, time.Second)).
					Count(topology.Named("sess"), topology.EmitFinal()).ToStream().To("out")
			}),
			[]step{
				{topic: "in", key: "k", ts: 1000, setup: true},
				{topic: "in", key: "k", ts: 3000, want: 3000 - 6001},
				{topic: "in", key: "k", ts: 9000, want: 2999}, // [1000, 3000] not final yet: its timestamp 3 000 is not covered
				{topic: "in", key: "k", ts: 9001, want: 3000}, // now it is
			}},
		{"session emitting every update: the input minus the gap (retractions carry old ends)",
			build(func(b *topology.Builder) {
				g := b.Stream("in", str, str).GroupByKey()
				topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, time.Second)).
					Count(topology.Named("sess")).ToStream().To("out")
			}),
			[]step{{topic: "in", key: "k", ts: 9000, want: 3999}, {topic: "in", key: "k", ts: 30000, want: 24999}}},
		{"inner stream-stream join: clock − grace − before − after − 1 (the stores' expiry cut)",
			build(func(b *topology.Builder) {
				l := b.Stream("left", str, str)
				r := b.Stream("right", str, str)
				l.Join(r, func(_, a, b string) string { return a + b }, topology.JoinWindowsOf(5*time.Second, time.Second).After(2*time.Second),
					topology.Named("j")).To("out")
			}),
			[]step{
				{topic: "left", key: "k", ts: 10000, want: 10000 - 1000 - 5000 - 2000 - 1},
				{topic: "right", key: "k", ts: 20000, want: 11999},
				{topic: "right", key: "k", ts: 15000, want: 11999}, // behind the clock: it stays
			}},
		{"left join: also bounded by its inputs",
			func(t *testing.T) *topology.Topology {
				b := topology.NewBuilder("app", topology.WithAllowedLateness(10*time.Second))
				l := b.Stream("left", str, str)
				r := b.Stream("right", str, str)
				l.LeftJoin(r, func(_, a, b string, _ bool) string { return a + b }, topology.JoinWindowsOf(time.Second, 0),
					topology.Named("j")).To("out")
				topo, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				return topo
			},
			[]step{
				{topic: "left", key: "k", ts: 20000, want: none}, // right has no record
				{topic: "right", key: "k", ts: 20000, want: 9999},
			}},
		{"a filter before a window: the window's clock, not the input's stream time",
			func(t *testing.T) *topology.Topology {
				b := topology.NewBuilder("app")
				g := b.Stream("in", str, str).Filter(func(_, v string) bool { return v != "drop" }).GroupByKey()
				topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 0)).
					Count(topology.Named("win"), topology.EmitFinal()).ToStream().To("out")
				topo, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				return topo
			},
			[]step{
				{topic: "in", key: "k", value: "keep", ts: 1000, want: -1},
				{topic: "in", key: "k", value: "drop", ts: 30000, want: -1},    // [0,10000) is still open
				{topic: "in", key: "k", value: "keep", ts: 30001, want: 29999}, // [20000,30000) closes with it
			}},
		{"two inputs, one without records: held back until it is idle",
			build(func(b *topology.Builder) {
				b.Stream("a", str, str).Merge(b.Stream("b", str, str)).To("out")
			}),
			[]step{
				{topic: "a", key: "k", ts: 5000, want: none},
				{idle: []string{"b"}, want: 4999},
				{topic: "a", key: "k", ts: 7000, want: 6999},
				{idle: []string{"a", "b"}, want: none, wantIdle: true}, // idle task: its own progress, b has none
				{idle: []string{}, want: none},
				{topic: "b", key: "k", ts: 6000, want: 5999},
			}},
		{"an idle input does not close a window",
			func(t *testing.T) *topology.Topology {
				return windowCount(t, topology.TumblingWindows(10*time.Second, 0), topology.EmitFinal())
			},
			[]step{{topic: "in", key: "k", ts: 5000, want: -1}, {idle: []string{"in"}, want: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWMTask(t, tt.topo(t))
			for i, s := range tt.steps {
				if s.idle != nil {
					w.idle = map[string]bool{}
					for _, topic := range s.idle {
						w.idle[topic] = true
					}
				} else {
					v := s.value
					if v == "" {
						v = "v"
					}
					k := s.key
					if k == "" {
						k = "k"
					}
					w.process(s.topic, k, v, s.ts)
				}
				if s.setup {
					continue
				}
				if got := w.wm("out"); got.Ms != s.want || got.Idle != s.wantIdle {
					t.Fatalf("step %d (%+v): watermark %d idle=%v, want %d idle=%v; bound %s", i, s, got.Ms, got.Idle, s.want, s.wantIdle, w.bounds.Sinks["out"])
				}
			}
		})
	}
}

func TestOutputWatermarksRejectAnUnknownClock(t *testing.T) {
	topo := windowCount(t, topology.TumblingWindows(10*time.Second, 0))
	w := newWMTask(t, topo)
	w.process("in", "k", "v", 1000)
	_, err := w.tk.OutputWatermarks(topology.SubTopologyBounds{Sinks: w.bounds.Sinks}, nil)
	if err == nil || !strings.Contains(err.Error(), "win") {
		t.Fatalf("bounds without the window's clock: err = %v, want one naming the clock", err)
	}
}

// TestLeftJoinCoversUnjoinedRecordsOnlyOnceEmitted: a left join emits an
// unjoined left record once the join's clock passes its window plus grace;
// the join's bound (clock − grace − reach − 1) claims it covered from that
// clock on, so the record must be out by then, however the clock moved.
func TestLeftJoinCoversUnjoinedRecordsOnlyOnceEmitted(t *testing.T) {
	b := topology.NewBuilder("app")
	str := serde.String()
	b.Stream("left", str, str).LeftJoin(b.Stream("right", str, str), func(_, l, r string, _ bool) string { return l + r },
		topology.JoinWindowsOf(time.Second, 0), topology.Named("j")).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := newWMTask(t, topo)
	w.process("right", "other", "r", 500)
	w.process("left", "k", "l", 1000) // waits for a right record until 2000
	for _, topic := range []string{"left", "right"} {
		tomb := record(topic, 0, 0, "x", "", 10000)
		tomb.Value = nil
		if err := w.tk.Process(tomb); err != nil {
			t.Fatal(err)
		}
	}
	emitted := false
	for _, r := range w.out.recs {
		emitted = emitted || strings.Contains(r, "=6c @1000") // "l" unjoined, at 1000
	}
	if got := w.wm("out"); got.Ms >= 1000 && !emitted {
		t.Fatalf("watermark %d covers the unjoined left record at 1000, which was not emitted: %v", got.Ms, w.out.recs)
	}
}
