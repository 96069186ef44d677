package tidemarktest_test

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// suppressTopology reads the table "in", suppresses it (store "sup") and
// writes its updates to "out"; with counts, it also counts the suppressed
// table's keys per value into "counts", an aggregation that subtracts old
// values, so wrong old values show there.
func suppressTopology(t *testing.T, s topology.Suppression, counts bool) *topology.Topology {
	t.Helper()
	str := serde.String()
	b := topology.NewBuilder("app")
	sup := b.Table("in", str, str, topology.Named("in-table")).Suppress(s, topology.Named("sup"))
	sup.ToStream().To("out")
	if counts {
		sup.GroupBy(func(k, v string) (string, string) { return v, k }, str, str, topology.Named("by-value")).
			Count(topology.Named("per-value")).ToStream().To("counts")
	}
	topo, err := b.Build()
	must(t, err)
	return topo
}

// supOut is an update as the suppressed table's ToStream writes it.
type supOut struct {
	Key, Value string
	Tombstone  bool
	TS         int64
	Header     string // the value of header "seq", "" when absent
}

func (o supOut) String() string {
	v := o.Value
	if o.Tombstone {
		v = "<delete>"
	}
	return fmt.Sprintf("%s=%s@%d[%s]", o.Key, v, o.TS, o.Header)
}

func readSup(t *testing.T, o *tidemarktest.OutputTopic[string, string]) []supOut {
	t.Helper()
	var out []supOut
	for _, r := range readAll(t, o) {
		so := supOut{Key: r.Key, Value: r.Value, Tombstone: r.Tombstone, TS: r.Timestamp}
		for _, h := range r.Headers {
			if h.Key == "seq" {
				so.Header = string(h.Value)
			}
		}
		out = append(out, so)
	}
	return out
}

// suppressModel is the reference semantics of a table suppressed
// UntilTimeLimit, written from the specification (Kafka Streams'
// KTableSuppressProcessor) rather than from the operator: the upstream
// table, a buffer of pending updates per key, and the table downstream
// sees.
type suppressModel struct {
	limit      int64
	maxRecords int
	maxBytes   int64
	observed   int64
	table      map[string]string // the upstream table
	buf        map[string]*pending
	view       map[string]string // what downstream saw: emitted values
	out        []supOut
	// For the output watermark: the input's stream time, and whether an
	// update reached the operator since the (re)start.
	inputTime int64
	reached   bool
}

type pending struct {
	entered, ts int64
	prior       *string // the key's value before it entered the buffer
	value       *string // the latest update; nil: a delete
	seq         string
}

func newSuppressModel(limit time.Duration, buf topology.BufferConfig) *suppressModel {
	return &suppressModel{limit: limit.Milliseconds(), maxRecords: buf.MaxRecords, maxBytes: buf.MaxBytes, observed: -1,
		table: map[string]string{}, buf: map[string]*pending{}, view: map[string]string{}}
}

func (m *suppressModel) size(k string, p *pending) int64 {
	n := len(k) + len("seq") + len(p.seq)
	if p.prior != nil {
		n += len(*p.prior)
	}
	if p.value != nil {
		n += len(*p.value)
	}
	return int64(n)
}

func (m *suppressModel) bytes() int64 {
	var n int64
	for k, p := range m.buf {
		n += m.size(k, p)
	}
	return n
}

// update applies one input record (value nil: a tombstone).
func (m *suppressModel) update(k string, v *string, ts int64, seq string) {
	m.inputTime = max(m.inputTime, ts)
	// A tombstone for a key the upstream table does not hold goes through
	// the buffer too (Kafka Streams' KTableSource forwards Change(null,
	// null), which its time-limit suppression buffers and emits).
	old, had := m.table[k]
	if v == nil {
		delete(m.table, k)
	} else {
		m.table[k] = *v
	}
	m.observed = max(m.observed, ts)
	m.reached = true
	p, ok := m.buf[k]
	if !ok {
		p = &pending{entered: ts}
		if had {
			p.prior = &old
		}
		m.buf[k] = p
	}
	p.ts, p.value, p.seq = ts, v, seq
	// Due keys, by entry time then key.
	for {
		k, ok := m.oldest()
		if !ok || m.buf[k].entered > m.observed-m.limit {
			break
		}
		m.emit(k)
	}
	for (m.maxRecords > 0 && len(m.buf) > m.maxRecords) || (m.maxBytes > 0 && m.bytes() > m.maxBytes) {
		k, _ := m.oldest()
		m.emit(k)
	}
}

func (m *suppressModel) oldest() (string, bool) {
	keys := make([]string, 0, len(m.buf))
	for k := range m.buf {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "", false
	}
	return slices.MinFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.buf[a].entered, m.buf[b].entered), strings.Compare(a, b))
	}), true
}

func (m *suppressModel) emit(k string) {
	p := m.buf[k]
	delete(m.buf, k)
	o := supOut{Key: k, TS: p.ts, Header: p.seq, Tombstone: p.value == nil}
	if p.value != nil {
		o.Value = *p.value
		m.view[k] = *p.value
	} else {
		delete(m.view, k)
	}
	m.out = append(m.out, o)
}

// watermark is the task's output watermark for the suppressed table's
// sink (no allowed lateness): one below the input's stream time (the next
// record may carry it), held back below the smallest timestamp still
// buffered; none before the first record, nor until an update reached the
// operator after a restart (it has not counted its restored buffer yet).
func (m *suppressModel) watermark() int64 {
	if m.inputTime < 0 || !m.reached {
		return math.MinInt64
	}
	w := m.inputTime - 1
	for _, p := range m.buf {
		w = min(w, p.ts-1)
	}
	return w
}

// countsByValue is what the per-value count downstream must hold: the
// number of keys downstream sees with each value.
func (m *suppressModel) countsByValue() map[string]int64 {
	c := map[string]int64{}
	for _, v := range m.view {
		c[v]++
	}
	return c
}

// Random updates and deletes, out of order and late, must give exactly the
// model's sequence of emitted updates (keys, values, deletes, timestamps,
// headers, order) and, through old values, the model's counts downstream;
// half-way the driver restarts with its stores restored from their
// changelogs, so the buffer must survive it.
func TestSuppressMatchesReferenceModel(t *testing.T) {
	configs := []struct {
		name  string
		limit time.Duration
		buf   topology.BufferConfig
	}{
		{"unbounded", time.Second, topology.BufferConfig{}},
		{"limit 0 passes updates through", 0, topology.BufferConfig{}},
		{"at most 3 records, emit early", 2 * time.Second, topology.BufferConfig{MaxRecords: 3}},
		{"at most 60 bytes, emit early", 2 * time.Second, topology.BufferConfig{MaxBytes: 60}},
	}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "a-longer-key"}
	for _, c := range configs {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed-%d", c.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(testSeed(t, seed), 7))
				topo := suppressTopology(t, topology.UntilTimeLimit(c.limit, c.buf), true)
				p := &changelogProvider{logs: map[string][]logged{}}
				m := newSuppressModel(c.limit, c.buf)
				var got []supOut
				counts := map[string]int64{} // the last count per value, across the restart
				const n = 400
				base := int64(0)
				late, deletes := 0, 0
				for half := range 2 {
					d, err := tidemarktest.New(topo, tidemarktest.WithStoreProvider(p))
					must(t, err)
					in := tidemarktest.Input(d, "in", serde.String(), serde.String())
					out := tidemarktest.Output(d, "out", serde.String(), serde.String())
					// The driver does not carry task clocks over a restart:
					// the operator's stream time starts again at -1.
					m.observed, m.inputTime, m.reached = -1, -1, false
					bounds, err := topo.OutputBounds(0)
					must(t, err)
					for i := range n / 2 {
						base += rng.Int64N(300)
						ts := base
						if rng.IntN(4) == 0 { // out of order, often beyond the limit
							ts = max(0, base-rng.Int64N(4000))
							if ts < m.observed-c.limit.Milliseconds() {
								late++
							}
						}
						k := keys[rng.IntN(len(keys))]
						seq := strconv.Itoa(half*n + i)
						rec := topology.Record[string, string]{Key: k, Timestamp: ts, Headers: []topology.Header{{Key: "seq", Value: []byte(seq)}}}
						if rng.IntN(6) == 0 {
							rec.Tombstone = true
							deletes++
							m.update(k, nil, ts, seq)
						} else {
							rec.Value = strings.Repeat(string(rune('a'+rng.IntN(5))), 1+rng.IntN(4))
							m.update(k, &rec.Value, ts, seq)
						}
						must(t, in.PipeRecord(rec))
						if tk := d.Tasks()[0]; tk.ID().SubTopology == 0 {
							wms, err := tk.OutputWatermarks(bounds, nil)
							must(t, err)
							if got, want := wms["out"].Ms, m.watermark(); got != want {
								t.Fatalf("after update %s: output watermark %d, model %d", seq, got, want)
							}
						}
					}
					got = append(got, readSup(t, out)...)
					for _, r := range readAll(t, tidemarktest.Output(d, "counts", serde.String(), serde.Int64())) {
						counts[r.Key] = r.Value
					}
					if half == 1 {
						for v, want := range m.countsByValue() {
							if counts[v] != want {
								t.Errorf("count of keys with value %q downstream = %d, model %d", v, counts[v], want)
							}
						}
						for v, n := range counts {
							if _, ok := m.countsByValue()[v]; !ok && n != 0 {
								t.Errorf("count of keys with value %q downstream = %d, model 0", v, n)
							}
						}
					}
					must(t, d.Close())
				}
				if !slices.Equal(got, m.out) {
					t.Errorf("emitted %d updates, model %d", len(got), len(m.out))
					for i := range max(len(got), len(m.out)) {
						var g, w string
						if i < len(got) {
							g = got[i].String()
						}
						if i < len(m.out) {
							w = m.out[i].String()
						}
						if g != w {
							t.Errorf("  #%d: got %s, model %s", i, g, w)
						}
					}
				}
				t.Logf("%d updates: %d emitted, %d late, %d deletes", n, len(m.out), late, deletes)
				if len(m.out) >= n || len(m.out) == 0 || late == 0 || deletes == 0 {
					if c.limit > 0 {
						t.Errorf("%d emitted of %d updates, %d late, %d deletes: the input does not exercise the buffer", len(m.out), n, late, deletes)
					}
				}
			})
		}
	}
}

// A table whose key k is updated at 1000 and 1500 emits once, the latest
// value with its own timestamp, when stream time reaches 1000 + limit; a
// late update goes out at once; a delete is buffered like an update.
func TestSuppressHoldsUpdatesUntilTimeLimit(t *testing.T) {
	d, err := tidemarktest.New(suppressTopology(t, topology.UntilTimeLimit(time.Second, topology.BufferConfig{}), false))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())
	steps := []struct {
		key, value string // value "": a tombstone
		ts         int64
		want       []supOut
		why        string
	}{
		{"k", "v1", 1000, nil, "k enters the buffer at 1000"},
		{"k", "v2", 1500, nil, "replaces v1, keeps entry time 1000"},
		{"j", "x", 1999, nil, "stream time 1999 < 1000 + 1000"},
		{"j", "y", 2000, []supOut{{Key: "k", Value: "v2", TS: 1500}}, "stream time 2000: k is due, with its latest timestamp"},
		{"k", "v3", 900, []supOut{{Key: "k", Value: "v3", TS: 900}}, "late (900 ≤ 2000 − 1000): out at once"},
		{"k", "", 2500, nil, "a delete is buffered"},
		{"z", "", 2600, nil, "a tombstone of a missing key never reaches the operator"},
		{"k", "v4", 2700, nil, "k deleted then set again: one buffered update"},
		{"m", "w", 3000, []supOut{{Key: "j", Value: "y", TS: 2000}}, "j (entered 1999) is due at 2999"},
		{"k", "", 3400, nil, "deleted again"},
		{"m", "w2", 3500, []supOut{{Key: "k", Tombstone: true, TS: 3400}}, "k (entered 2500) emits its latest update, a delete"},
	}
	for _, s := range steps {
		if s.value == "" {
			must(t, in.PipeTombstone(s.key, s.ts))
		} else {
			must(t, in.Pipe(s.key, s.value, s.ts))
		}
		if got := readSup(t, out); !slices.Equal(got, s.want) {
			t.Errorf("%s: out = %v, want %v", s.why, got, s.want)
		}
	}
	// No wall-clock punctuation: time passing emits nothing.
	must(t, d.AdvanceWallClock(time.Hour))
	if got := readSup(t, out); len(got) != 0 {
		t.Errorf("after an hour of wall-clock time: out = %v, want nothing (stream time stands still)", got)
	}
}

// A full buffer emits its oldest keys early (the default), before their
// time limit, and a new update of a key emitted early is buffered again.
func TestSuppressEmitsEarlyWhenFull(t *testing.T) {
	d, err := tidemarktest.New(suppressTopology(t, topology.UntilTimeLimit(time.Minute, topology.BufferConfig{MaxRecords: 2}), false))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())
	must(t, in.Pipe("b", "1", 2000))
	must(t, in.Pipe("a", "1", 1000)) // out of order: a is the oldest
	must(t, in.Pipe("b", "2", 2500)) // replaces b: still 2 keys
	if got := readSup(t, out); len(got) != 0 {
		t.Fatalf("two keys buffered, at most 2: out = %v, want nothing", got)
	}
	must(t, in.Pipe("c", "1", 3000))
	must(t, in.Pipe("a", "2", 3100)) // a was emitted early: it enters again, b is now the oldest
	want := []supOut{{Key: "a", Value: "1", TS: 1000}, {Key: "b", Value: "2", TS: 2500}}
	if got := readSup(t, out); !slices.Equal(got, want) {
		t.Errorf("over capacity: out = %v, want the oldest key emitted early each time %v", got, want)
	}

	// By bytes: key + old value + new value (+ headers) per entry.
	d2, err := tidemarktest.New(suppressTopology(t, topology.UntilTimeLimit(time.Minute, topology.BufferConfig{MaxBytes: 10}), false))
	must(t, err)
	t.Cleanup(func() { must(t, d2.Close()) })
	in = tidemarktest.Input(d2, "in", serde.String(), serde.String())
	out = tidemarktest.Output(d2, "out", serde.String(), serde.String())
	must(t, in.Pipe("k", "12345", 1000))  // 1 + 5 = 6 bytes
	must(t, in.Pipe("j", "123", 1100))    // 6 + 4 = 10 bytes: full, not over
	must(t, in.Pipe("j", "1234", 1200))   // 6 + 5 = 11: k goes out
	must(t, in.Pipe("kk", "1234", 1300))  // 5 + 6 = 11: j goes out
	must(t, in.Pipe("kk", "12345", 1300)) // 7: stays
	want = []supOut{{Key: "k", Value: "12345", TS: 1000}, {Key: "j", Value: "1234", TS: 1200}}
	if got := readSup(t, out); !slices.Equal(got, want) {
		t.Errorf("over 10 bytes: out = %v, want %v", got, want)
	}
}

// With ShutDownWhenFull, an update that leaves the buffer over capacity
// fails the task with an error naming the operator.
func TestSuppressShutDownWhenFull(t *testing.T) {
	for _, buf := range []topology.BufferConfig{{MaxRecords: 2, ShutDownWhenFull: true}, {MaxBytes: 4, ShutDownWhenFull: true}} {
		d, err := tidemarktest.New(suppressTopology(t, topology.UntilTimeLimit(time.Minute, buf), false))
		must(t, err)
		in := tidemarktest.Input(d, "in", serde.String(), serde.String())
		out := tidemarktest.Output(d, "out", serde.String(), serde.String())
		must(t, in.Pipe("a", "1", 1000))
		must(t, in.Pipe("b", "1", 1000))
		must(t, in.Pipe("a", "2", 1000)) // replaces: still 2 keys, 4 bytes
		err = in.Pipe("c", "1", 1000)
		if !errors.Is(err, topology.ErrSuppressBufferFull) || !strings.Contains(err.Error(), `"sup"`) {
			t.Errorf("%+v: third key: error %v, want ErrSuppressBufferFull naming operator sup", buf, err)
		}
		if got := readSup(t, out); len(got) != 0 {
			t.Errorf("%+v: out = %v, want nothing emitted early", buf, got)
		}
		_ = d.Close()
	}
}

// Operators that look the suppressed table up (here a stream-table join)
// see what downstream saw: a buffered key reads as its value before its
// first buffered update; other keys read through to the upstream table.
func TestSuppressedTableLookupSeesPriorValue(t *testing.T) {
	str := serde.String()
	b := topology.NewBuilder("app")
	sup := b.Table("in", str, str, topology.Named("in-table")).
		Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{}), topology.Named("sup"))
	b.Stream("lookups", str, str).
		LeftJoinTable(sup, func(_, _ string, v string, found bool) string {
			if !found {
				return "<none>"
			}
			return v
		}).To("seen")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", str, str)
	look := tidemarktest.Input(d, "lookups", str, str)
	seen := tidemarktest.Output(d, "seen", str, str)
	lookup := func(want, why string) {
		t.Helper()
		must(t, look.Pipe("k", "", 0))
		if got, err := seen.ReadKeyValues(); err != nil || len(got) != 1 || got[0].Value != want {
			t.Errorf("%s: lookup of k = %v (%v), want %q", why, got, err, want)
		}
	}
	must(t, in.Pipe("k", "v1", 1000))
	lookup("<none>", "k buffered, did not exist before")
	must(t, in.Pipe("x", "", 2000)) // moves stream time: k is emitted
	lookup("v1", "k emitted: reads through to the upstream table")
	must(t, in.Pipe("k", "v2", 2100))
	must(t, in.Pipe("k", "v3", 2200))
	lookup("v1", "k buffered again: its value before, v1")
	must(t, in.PipeTombstone("k", 2300))
	lookup("v1", "a buffered delete: still v1")
	must(t, in.Pipe("x", "", 3100))
	lookup("<none>", "the delete emitted")
}

// Suppress works on windowed tables too, per (key, window): here it
// rate-limits the updates of a running windowed count (EmitFinal is what
// gives one final result per window).
func TestSuppressWindowedTable(t *testing.T) {
	str := serde.String()
	b := topology.NewBuilder("app")
	topology.WindowedBy(b.Stream("in", str, str).GroupByKey(), topology.TumblingWindows(10*time.Second, 0)).
		Count(topology.Named("counts")).
		Suppress(topology.UntilTimeLimit(5*time.Second, topology.BufferConfig{}), topology.Named("counts-5s")).
		ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", str, str)
	out := tidemarktest.Output(d, "out", topology.TimeWindowedSerde(str, 10*time.Second), serde.Int64())
	for _, ts := range []int64{1000, 2000, 6000, 12000, 20000} {
		must(t, in.Pipe("k", "", ts))
	}
	var got []string
	for _, r := range readAll(t, out) {
		got = append(got, fmt.Sprintf("%s@%d=%d@%d", r.Key.Key, r.Key.Start, r.Value, r.Timestamp))
	}
	// [0, 10s) entered at 1000 and is emitted at 6000 with its count then;
	// [10s, 20s) entered at 12000 and is emitted at 20000 (≥ 17000).
	if want := []string{"k@0=3@6000", "k@10000=1@12000"}; !slices.Equal(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
}
