package processor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// logLines is a slog.Handler keeping each line as "msg k=v k=v", attributes
// in order, without the time.
type logLines struct{ lines *[]string }

func (h logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h logLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logLines) WithGroup(string) slog.Handler            { return h }
func (h logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	*h.lines = append(*h.lines, b.String())
	return nil
}

// dropTest is an exporter on a registry of its own, with its log lines.
type dropTest struct {
	d     *droppedRecords
	reg   *prometheus.Registry
	log   *slog.Logger
	lines *[]string
}

func newDropTest() dropTest {
	reg := prometheus.NewRegistry()
	var lines []string
	return dropTest{d: newDroppedRecords(reg, prometheus.Labels{"app": "test"}), reg: reg, log: slog.New(logLines{&lines}), lines: &lines}
}

// scrape returns the tidemark_ samples of the registry's /metrics page,
// "name{labels} value" per line, as Prometheus would read them.
func (dt dropTest) scrape(t *testing.T) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(dt.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "tidemark_") {
			out = append(out, l)
		}
	}
	return out
}

// sample is the value of one series on the scrape, "" when absent.
func (dt dropTest) sample(t *testing.T, series string) string {
	t.Helper()
	for _, l := range dt.scrape(t) {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}

func tasksOf(ts ...*task.Task) func(func(*task.Task) bool) {
	return func(yield func(*task.Task) bool) {
		for _, t := range ts {
			if !yield(t) {
				return
			}
		}
	}
}

func newTestTask(t *testing.T, topo *topology.Topology, partition int32) *task.Task {
	t.Helper()
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: partition, Stores: memstore.NewProvider(),
		Output: task.CollectorFunc(func(topology.TaskID, *topology.OutputRecord) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close() })
	return tk
}

// dropper is a task of partition 0 whose operator drops every record drop
// gives it, as operators drop records (the task counts them through
// topology.TaskEnv.Dropped): a windowed count named node drops records
// behind its window's grace (reason late), a count named node records with
// a null key (reason null-key).
type dropper struct {
	tk  *task.Task
	rec topology.InputRecord // what drop pipes
}

func newDropper(t *testing.T, node string, reason topology.DropReason) *dropper {
	t.Helper()
	b := topology.NewBuilder("app")
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	d := &dropper{rec: topology.InputRecord{Topic: "in", Key: []byte("k"), Value: []byte("v")}}
	switch reason {
	case topology.DropLate:
		topology.WindowedBy(g, topology.TumblingWindows(time.Second, 0)).Count(topology.Named(node))
	case topology.DropNullKey:
		g.Count(topology.Named(node))
		d.rec.Key = nil
	default:
		t.Fatalf("dropper: no operator drops for reason %s", reason)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d.tk = newTestTask(t, topo, 0)
	if reason == topology.DropLate {
		// Move the window's clock on: the window of timestamp 0 is closed.
		prime := topology.InputRecord{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: 10_000}
		if err := d.tk.Process(&prime); err != nil {
			t.Fatal(err)
		}
		d.rec.Offset = 1
	}
	return d
}

// drop has the task drop n records.
func (d *dropper) drop(t *testing.T, n int) {
	t.Helper()
	for range n {
		rec := d.rec
		if err := d.tk.Process(&rec); err != nil {
			t.Fatal(err)
		}
		d.rec.Offset++
	}
}

// A count over a source that skips undecodable values: null keys and
// tombstones are dropped by the count, undecodable records by the source,
// and the exporter labels each with its task, operator and reason.
func TestDroppedRecordsExportedByTaskNodeAndReason(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.Int64(), topology.SkipUndecodable(), topology.Named("in")).
		GroupByKey().Count(topology.Named("counts"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk := newTestTask(t, topo, 1)
	eight := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	for i, in := range []topology.InputRecord{
		{Key: nil, Value: eight},               // null key: the count drops it
		{Key: nil, Value: eight},               // again
		{Key: []byte{}, Value: eight},          // empty key: counted under ""
		{Key: []byte("a"), Value: nil},         // tombstone: skipped
		{Key: []byte("a"), Value: []byte{1}},   // undecodable int64: the source drops it
		{Key: []byte("a"), Value: eight},       // counted
		{Key: nil, Value: nil, Timestamp: 100}, // null key and tombstone: the null key decides
	} {
		in.Topic, in.Partition, in.Offset = "in", 1, int64(i)
		if err := tk.Process(&in); err != nil {
			t.Fatal(err)
		}
	}
	dt := newDropTest()
	s := &session{app: &App{log: dt.log}, tasks: map[topology.TaskID]*liveTask{tk.ID(): {task: tk}}, txn: &txnState{}}
	s.exportDropped(dt.d, time.Unix(1000, 0))
	if s.txn.undecodable != 1 { // the SkipUndecodable drop, counted when the transaction commits
		t.Errorf("the transaction's undecodable records: %d, want 1", s.txn.undecodable)
	}

	want := []string{
		`tidemark_dropped_records_total{app="test",node="counts",reason="null-key",task="0_1"} 3`,
		`tidemark_dropped_records_total{app="test",node="counts",reason="skipped",task="0_1"} 1`,
		`tidemark_dropped_records_total{app="test",node="in",reason="undecodable",task="0_1"} 1`,
	}
	if got := dt.scrape(t); !slices.Equal(got, want) {
		t.Errorf("/metrics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantLines := []string{
		"WARN dropped records task=0_1 node=counts reason=skipped count=1",
		"WARN dropped records task=0_1 node=counts reason=null-key count=3",
		"WARN dropped records task=0_1 node=in reason=undecodable count=1",
	}
	if !slices.Equal(*dt.lines, wantLines) {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(*dt.lines, "\n"), strings.Join(wantLines, "\n"))
	}
}

// The rate limiter, on an injected clock: the first drop of a site is
// logged at once, later ones at most every 10 s with the count since the
// last line; a line that is due goes out even when nothing more was
// dropped. The counter follows every drop at once.
func TestDroppedRecordsLogRateLimit(t *testing.T) {
	t.Parallel()
	type step struct {
		at    time.Duration // since the start
		drops int
		lines []string // counts logged at this step
		total string   // the counter after it
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first drop is logged at once", []step{
			{0, 1, []string{"count=1"}, "1"},
		}},
		{"drops within 10s wait for the next line", []step{
			{0, 1, []string{"count=1"}, "1"},
			{time.Second, 5, nil, "6"},
			{9 * time.Second, 2, nil, "8"},
			{10 * time.Second, 0, []string{"count=7 since=10s"}, "8"},
			{11 * time.Second, 1, nil, "9"},
			{19 * time.Second, 0, nil, "9"},
			{20 * time.Second, 0, []string{"count=1 since=10s"}, "9"},
		}},
		{"no drops, no lines", []step{
			{0, 1, []string{"count=1"}, "1"},
			{15 * time.Second, 0, nil, "1"},
			{40 * time.Second, 0, nil, "1"},
		}},
		{"after a quiet spell the next drop is logged at once", []step{
			{0, 1, []string{"count=1"}, "1"},
			{25 * time.Second, 3, []string{"count=3 since=25s"}, "4"},
			{26 * time.Second, 1, nil, "5"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dt := newDropTest()
			d := newDropper(t, "late-op", topology.DropLate)
			start := time.Unix(0, 0)
			for i, s := range c.steps {
				d.drop(t, s.drops)
				*dt.lines = (*dt.lines)[:0]
				dt.d.export(start.Add(s.at), dt.log, tasksOf(d.tk), nil)
				var want []string
				for _, l := range s.lines {
					want = append(want, "WARN dropped records task=0_0 node=late-op reason=late "+l)
				}
				if !slices.Equal(*dt.lines, want) {
					t.Errorf("step %d (at %v): lines %q, want %q", i, s.at, *dt.lines, want)
				}
				if got := dt.sample(t, `tidemark_dropped_records_total{app="test",node="late-op",reason="late",task="0_0"}`); got != s.total {
					t.Errorf("step %d (at %v): counter %s, want %s", i, s.at, got, s.total)
				}
			}
		})
	}
}

// A task recreated after an abort counts from zero again: the exported
// counter keeps growing, the rate limit of the site carries over, and a
// task that left has its pending count logged once it is due.
func TestDroppedRecordsAcrossTaskInstances(t *testing.T) {
	t.Parallel()
	dt := newDropTest()
	start := time.Unix(0, 0)
	first := newDropper(t, "op", topology.DropNullKey)
	first.drop(t, 3)
	dt.d.export(start, dt.log, tasksOf(first.tk), nil)

	second := newDropper(t, "op", topology.DropNullKey) // the same task id, as resetTasks makes it
	second.drop(t, 1)
	dt.d.export(start.Add(time.Second), dt.log, tasksOf(second.tk), nil)
	if got := dt.sample(t, `tidemark_dropped_records_total{app="test",node="op",reason="null-key",task="0_0"}`); got != "4" {
		t.Errorf("counter after the task was recreated = %s, want 4 (3 + 1)", got)
	}
	dt.d.export(start.Add(2*time.Second), dt.log, tasksOf(), nil) // the task left
	dt.d.export(start.Add(10*time.Second), dt.log, tasksOf(), nil)
	dt.d.export(start.Add(30*time.Second), dt.log, tasksOf(), nil)
	want := []string{
		"WARN dropped records task=0_0 node=op reason=null-key count=3",
		"WARN dropped records task=0_0 node=op reason=null-key count=1 since=10s",
	}
	if !slices.Equal(*dt.lines, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(*dt.lines, "\n"), strings.Join(want, "\n"))
	}
	if len(dt.d.sites) != 0 {
		t.Errorf("%d sites remembered after the task left and its last line, want 0", len(dt.d.sites))
	}
}

func TestFlushDroppedLogsPendingCounts(t *testing.T) {
	t.Parallel()
	dt := newDropTest()
	d := newDropper(t, "op", topology.DropLate)
	s := &session{app: &App{log: dt.log}, tasks: map[topology.TaskID]*liveTask{d.tk.ID(): {task: d.tk}}}
	start := time.Unix(0, 0)
	d.drop(t, 1)
	s.exportDropped(dt.d, start)
	d.drop(t, 2)
	s.exportDropped(dt.d, start.Add(time.Second))
	s.flushDropped(dt.d, start.Add(2*time.Second))
	want := []string{
		"WARN dropped records task=0_0 node=op reason=late count=1",
		"WARN dropped records task=0_0 node=op reason=late count=2 since=2s",
	}
	if !slices.Equal(*dt.lines, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(*dt.lines, "\n"), strings.Join(want, "\n"))
	}
}
