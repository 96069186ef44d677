package task_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// The output watermark property test: random input within the allowed
// lateness, fed record by record to a task, must never produce an output
// at or below a watermark the task claimed before it.
//
// TIDEMARK_WM_SEED sets the first seed (default 1) and TIDEMARK_WM_RUNS the
// number of seeds per topology (default wmDefaultRuns); seed s of a topology
// always generates the same parameters and records, so a failure replays
// with TIDEMARK_WM_SEED=s TIDEMARK_WM_RUNS=1 and -run naming the subtest.

const wmDefaultRuns = 300

// wmParams are one run's operator parameters (ms), drawn from the seed;
// each topology reads the ones it needs.
type wmParams struct {
	size, advance, grace int64 // time and sliding windows (size: the sliding difference), sessions (size: the gap)
	before, after        int64 // joins
	final                bool  // windowed aggregations: EmitFinal
	limit                int64 // suppress: time limit
	maxRecords           int   // suppress: buffer bound (0: unbounded)
}

type wmCase struct {
	name   string
	topics []string
	params func(g wmGen) wmParams
	// build adds the topology, reading topics and writing "out".
	build func(b *topology.Builder, p wmParams)
	// describe renders the parameters build reads.
	describe func(p wmParams) string
}

// wmRec is one input record; key "" is a null key, a tombstone has no
// value.
type wmRec struct {
	topic, key, value string
	tomb              bool
	ts                int64
}

func (r wmRec) String() string {
	k, v := strconv.Quote(r.key), strconv.Quote(r.value)
	if r.key == "" {
		k = "null"
	}
	if r.tomb {
		v = "tombstone"
	}
	return fmt.Sprintf("%s %s=%s @%d", r.topic, k, v, r.ts)
}

// wmRun is everything one run is made of: replaying it replays the run.
type wmRun struct {
	seed     uint64
	lateness int64
	p        wmParams
	recs     []wmRec
}

// wmViolation is an output at or below a watermark claimed before it.
type wmViolation struct {
	step   int   // index of the record whose processing wrote it
	ts     int64 // its timestamp
	claim  int64 // the largest watermark read before that record
	claimC int   // the record after which that watermark was read
	out    string
}

func (v *wmViolation) String() string {
	return fmt.Sprintf("record #%d wrote %s with timestamp %d, but the watermark read after record #%d was %d",
		v.step, v.out, v.ts, v.claimC, v.claim)
}

func wmEnv(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// wmGen draws a run's numbers at the run's time scale m: window sizes,
// gaps, lateness and steps are fractions of m. A tiny m (a few ms) makes
// records land exactly on window bounds and lateness limits, where an
// off-by-one in a bound shows.
type wmGen struct {
	*rand.Rand
	m int64
}

// upTo draws from [0, x].
func (g wmGen) upTo(x int64) int64 { return g.Int64N(max(x, 0) + 1) }

// TestOutputWatermarkIsSound checks the output watermark's claim
// (topology/watermark.go) on random input: for each topology, many seeds
// each draw operator parameters, an allowed lateness and a few hundred
// records (several keys, one or two input topics, timestamps advancing with
// disorder and skew between inputs, occasional tombstones and null keys).
// Every record is within the allowed lateness of its input: at or above
// that input's stream time minus the lateness (an input's first record can
// be anything; with no lateness, records share a millisecond, as a
// producer's do). The records go to a
// task one by one, and the sink's watermark is read after each: every
// output written later must have a timestamp above every watermark read
// before it. A failing run is shrunk (records dropped while it still fails;
// dropping records never makes the others late) and reported with its seed
// and records.
func TestOutputWatermarkIsSound(t *testing.T) {
	base := wmEnv(t, "TIDEMARK_WM_SEED", 1)
	runs := wmEnv(t, "TIDEMARK_WM_RUNS", wmDefaultRuns)
	t.Logf("seeds %d..%d per topology (set TIDEMARK_WM_SEED and TIDEMARK_WM_RUNS to replay others)", base, base+runs-1)
	start := time.Now()
	for _, c := range wmCases() {
		t.Run(c.name, func(t *testing.T) {
			var recs, outs int
			for s := base; s < base+runs; s++ {
				run := genWMRun(c, s)
				v, n := replayWM(t, c, run)
				recs, outs = recs+len(run.recs), outs+n
				if v == nil {
					continue
				}
				full := len(run.recs)
				run, v = shrinkWM(t, c, run)
				var lines strings.Builder
				for i, r := range run.recs {
					fmt.Fprintf(&lines, "\n\t#%d %s", i, r)
				}
				t.Errorf("seed %d (replay: TIDEMARK_WM_SEED=%d TIDEMARK_WM_RUNS=1 go test ./task/ -run 'TestOutputWatermarkIsSound/%s$'): "+
					"unsound watermark for %s, allowed lateness %dms; %s\nshrunk from %d to %d records:%s",
					s, s, c.name, c.describe(run.p), run.lateness, v, full, len(run.recs), lines.String())
				return
			}
			t.Logf("%d seeds, %d records, %d outputs: no output at or below an earlier watermark", runs, recs, outs)
		})
	}
	t.Logf("%v", time.Since(start).Round(time.Millisecond))
}

// genWMRun draws the run of c for seed: its parameters, allowed lateness
// and records.
func genWMRun(c wmCase, seed uint64) wmRun {
	h := fnv.New64a()
	h.Write([]byte(c.name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	gen := wmGen{Rand: r, m: pick[int64](r, 8, 3000, 3000)}
	m := gen.m
	run := wmRun{seed: seed, p: c.params(gen)}
	run.lateness = pick(r, 0, 0, 1, m/60, gen.upTo(m))
	keys := []string{"a", "b", "c", "d"}[:1+r.IntN(4)]
	n := 50 + r.IntN(250)
	// Each input follows a common clock g minus its own skew, which drifts,
	// and minus a random disorder; a record is then raised to just inside
	// the allowed lateness of its input if it fell behind it.
	skew := map[string]int64{}
	st := map[string]int64{}
	for _, topic := range c.topics {
		st[topic] = -1
	}
	skewed := len(c.topics) > 1 && r.IntN(2) == 0
	var g int64
	for range n {
		switch x := r.IntN(20); {
		case x == 0:
			g += gen.upTo(5 * m / 3) // a jump
		case x < 4:
			// same time
		default:
			g += gen.upTo(m / 10)
		}
		topic := c.topics[r.IntN(len(c.topics))]
		if skewed && r.IntN(10) == 0 {
			skew[topic] = max(0, skew[topic]+gen.upTo(4*m/3)-2*m/3)
		}
		ts := g - skew[topic]
		if r.IntN(3) == 0 {
			ts -= gen.upTo(run.lateness + m/30)
		}
		if st[topic] >= 0 {
			ts = max(ts, st[topic]-run.lateness)
		}
		ts = max(ts, 0)
		st[topic] = max(st[topic], ts)
		rec := wmRec{topic: topic, key: pick(r, keys...), value: fmt.Sprintf("v%d", r.IntN(10)), ts: ts}
		switch x := r.IntN(100); {
		case x < 6:
			rec.tomb, rec.value = true, ""
		case x < 9:
			rec.key = ""
		}
		run.recs = append(run.recs, rec)
	}
	return run
}

// replayWM runs run's records through a fresh task of c and returns the
// first output at or below an earlier watermark (nil: none) and how many
// outputs there were.
func replayWM(t *testing.T, c wmCase, run wmRun) (*wmViolation, int) {
	t.Helper()
	b := topology.NewBuilder("app", topology.WithAllowedLateness(time.Duration(run.lateness)*time.Millisecond))
	c.build(b, run.p)
	topo, err := b.Build()
	if err != nil {
		t.Fatalf("%s: %v", c.describe(run.p), err)
	}
	bounds, err := topo.OutputBounds(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bounds.Sinks["out"]; !ok {
		t.Fatalf("%s: no bound for sink out: %v", c.name, bounds.Sinks)
	}
	claim, claimAt, step, outs := int64(math.MinInt64), -1, 0, 0
	var v *wmViolation
	out := task.CollectorFunc(func(_ topology.TaskID, r *topology.OutputRecord) error {
		if r.Topic != "out" {
			return nil
		}
		outs++
		if v == nil && r.Timestamp <= claim {
			v = &wmViolation{step: step, ts: r.Timestamp, claim: claim, claimC: claimAt,
				out: fmt.Sprintf("%q=%q", r.Key, r.Value)}
		}
		return nil
	})
	tk, err := task.New(task.Params{Topology: topo, Stores: memstore.NewProvider(), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	for i, rec := range run.recs {
		step = i
		in := &topology.InputRecord{Topic: rec.topic, Offset: int64(i), Timestamp: rec.ts}
		if rec.key != "" {
			in.Key = []byte(rec.key)
		}
		if !rec.tomb {
			in.Value = []byte(rec.value)
		}
		if err := tk.Process(in); err != nil {
			t.Fatalf("seed %d record #%d %s: %v", run.seed, i, rec, err)
		}
		if v != nil {
			return v, outs
		}
		wms, err := tk.OutputWatermarks(bounds, nil)
		if err != nil {
			t.Fatal(err)
		}
		if w := wms["out"]; w.Idle {
			t.Fatalf("seed %d record #%d: watermark %d idle with no idle input", run.seed, i, w.Ms)
		} else if w.Ms > claim {
			claim, claimAt = w.Ms, i
		}
	}
	return nil, outs
}

// shrinkWM drops records of a failing run while it still fails. The
// remaining records stay within the allowed lateness: an input's stream
// time only falls when records are dropped.
func shrinkWM(t *testing.T, c wmCase, run wmRun) (wmRun, *wmViolation) {
	t.Helper()
	v, _ := replayWM(t, c, run)
	// The records after the violating one play no part.
	run.recs = run.recs[:v.step+1]
	for changed := true; changed; {
		changed = false
		for i := len(run.recs) - 1; i >= 0; i-- {
			try := run
			try.recs = append(append([]wmRec(nil), run.recs[:i]...), run.recs[i+1:]...)
			if tv, _ := replayWM(t, c, try); tv != nil {
				run, v, changed = try, tv, true
				run.recs = run.recs[:v.step+1]
				i = min(i, len(run.recs))
			}
		}
	}
	return run, v
}

func wmCases() []wmCase {
	str := serde.String()
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	upper := func(_, v string) string { return strings.ToUpper(v) }
	in := func(b *topology.Builder) topology.Stream[string, string] { return b.Stream("in", str, str) }
	grouped := func(b *topology.Builder) topology.GroupedStream[string, string] {
		return in(b).Filter(func(_, v string) bool { return v != "v0" }).GroupByKey()
	}
	windowOpts := func(p wmParams, name string) []topology.WindowOption {
		opts := []topology.WindowOption{topology.Named(name)}
		if p.final {
			opts = append(opts, topology.EmitFinal())
		}
		return opts
	}
	winDesc := func(p wmParams) string {
		return fmt.Sprintf("size %d advance %d grace %d final %v", p.size, p.advance, p.grace, p.final)
	}
	gapDesc := func(p wmParams) string {
		return fmt.Sprintf("gap/diff %d grace %d final %v", p.size, p.grace, p.final)
	}
	joinDesc := func(p wmParams) string {
		return fmt.Sprintf("before %d after %d grace %d", p.before, p.after, p.grace)
	}
	grace := func(g wmGen) int64 { return pick(g.Rand, 0, 0, 1, g.upTo(2*g.m/3)) }
	tumbling := func(final bool) func(g wmGen) wmParams {
		return func(g wmGen) wmParams {
			s := 1 + g.upTo(g.m)
			return wmParams{size: s, advance: s, grace: grace(g), final: final}
		}
	}
	hopping := func(final bool) func(g wmGen) wmParams {
		return func(g wmGen) wmParams {
			s := 2 + g.upTo(g.m)
			return wmParams{size: s, advance: 1 + g.upTo(s-1), grace: grace(g), final: final}
		}
	}
	gapped := func(final bool) func(g wmGen) wmParams {
		return func(g wmGen) wmParams {
			return wmParams{size: 1 + g.upTo(2*g.m/3), grace: grace(g), final: final}
		}
	}
	// Joins: asymmetric windows, one side possibly negative (before + after
	// ≥ 0 is all the builder asks).
	joinParams := func(g wmGen) wmParams {
		p := wmParams{before: g.upTo(2 * g.m / 3), after: g.upTo(2 * g.m / 3), grace: grace(g)}
		switch g.IntN(6) {
		case 0:
			p.after = -g.upTo(p.before)
		case 1:
			p.before = -g.upTo(p.after)
		case 2:
			p.before = 0
		}
		return p
	}
	jw := func(p wmParams) topology.JoinWindows {
		return topology.JoinWindowsOf(0, ms(p.grace)).Before(ms(p.before)).After(ms(p.after))
	}
	suppressParams := func(g wmGen) wmParams {
		return wmParams{limit: pick(g.Rand, 0, g.upTo(g.m)), maxRecords: pick(g.Rand, 0, 0, 1, 2)}
	}
	timeWindowed := func(name string, params func(wmGen) wmParams, hop bool) wmCase {
		return wmCase{name: name, topics: []string{"in"}, params: params, describe: winDesc,
			build: func(b *topology.Builder, p wmParams) {
				w := topology.TumblingWindows(ms(p.size), ms(p.grace))
				if hop {
					w = topology.HoppingWindows(ms(p.size), ms(p.advance), ms(p.grace))
				}
				topology.WindowedBy(grouped(b), w).Count(windowOpts(p, "win")...).ToStream().To("out")
			}}
	}
	session := func(name string, final bool) wmCase {
		return wmCase{name: name, topics: []string{"in"}, params: gapped(final), describe: gapDesc,
			build: func(b *topology.Builder, p wmParams) {
				topology.SessionWindowedBy(grouped(b), topology.SessionWindowsWithGap(ms(p.size), ms(p.grace))).
					Count(windowOpts(p, "sess")...).ToStream().To("out")
			}}
	}
	sliding := func(name string, final bool) wmCase {
		return wmCase{name: name, topics: []string{"in"}, params: gapped(final), describe: gapDesc,
			build: func(b *topology.Builder, p wmParams) {
				opts := []topology.SlidingWindowOption{topology.Named("slide")}
				if p.final {
					opts = append(opts, topology.EmitFinal())
				}
				topology.SlidingWindowedBy(grouped(b), topology.SlidingWindowsWithDiff(ms(p.size), ms(p.grace))).
					Count(opts...).ToStream().To("out")
			}}
	}
	join := func(name string, build func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string]) wmCase {
		return wmCase{name: name, topics: []string{"left", "right"}, params: joinParams, describe: joinDesc,
			build: func(b *topology.Builder, p wmParams) {
				build(b.Stream("left", str, str), b.Stream("right", str, str), jw(p)).To("out")
			}}
	}
	return []wmCase{
		{name: "stateless", topics: []string{"in"}, params: func(wmGen) wmParams { return wmParams{} },
			describe: func(wmParams) string { return "filter, map" },
			build: func(b *topology.Builder, _ wmParams) {
				in(b).Filter(func(_, v string) bool { return v != "v1" }).
					Map(func(k, v string) (string, string) { return v, k }).MapValues(upper).To("out")
			}},
		{name: "stateless-merge", topics: []string{"left", "right"}, params: func(wmGen) wmParams { return wmParams{} },
			describe: func(wmParams) string { return "merge, filter" },
			build: func(b *topology.Builder, _ wmParams) {
				b.Stream("left", str, str).Merge(b.Stream("right", str, str).MapValues(upper)).
					Filter(func(_, v string) bool { return v != "v2" }).To("out")
			}},
		timeWindowed("tumbling", tumbling(false), false),
		timeWindowed("tumbling-final", tumbling(true), false),
		timeWindowed("hopping", hopping(false), true),
		timeWindowed("hopping-final", hopping(true), true),
		sliding("sliding", false),
		sliding("sliding-final", true),
		session("session-eager", false),
		session("session-final", true),
		join("join-inner", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.Join(r, func(_, a, b string) string { return a + b }, w, topology.Named("j"))
		}),
		join("join-left", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.LeftJoin(r, func(_, a, b string, _ bool) string { return a + b }, w, topology.Named("j"))
		}),
		join("join-outer", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.OuterJoin(r, func(_, a string, _ bool, b string, _ bool) string { return a + b }, w, topology.Named("j"))
		}),
		{name: "table-suppress", topics: []string{"in"},
			params:   suppressParams,
			describe: func(p wmParams) string { return fmt.Sprintf("limit %d max records %d", p.limit, p.maxRecords) },
			build: func(b *topology.Builder, p wmParams) {
				b.Table("in", str, str, topology.Named("tbl")).
					Suppress(topology.UntilTimeLimit(ms(p.limit), topology.BufferConfig{MaxRecords: p.maxRecords}), topology.Named("sup")).
					ToStream().To("out")
			}},
		{name: "count-suppress", topics: []string{"in"},
			params:   suppressParams,
			describe: func(p wmParams) string { return fmt.Sprintf("limit %d max records %d", p.limit, p.maxRecords) },
			build: func(b *topology.Builder, p wmParams) {
				grouped(b).Count(topology.Named("cnt")).
					Suppress(topology.UntilTimeLimit(ms(p.limit), topology.BufferConfig{MaxRecords: p.maxRecords}), topology.Named("sup")).
					ToStream().To("out")
			}},
	}
}
