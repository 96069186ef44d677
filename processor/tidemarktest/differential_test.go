package tidemarktest_test

// Randomized differential tests: session windows and stream-stream joins
// against brute-force reference models of the semantics their godoc and the
// README ("Windows", "Joins") document. Each case draws its parameters and
// input from a seed; a failing case is shrunk (records removed while it
// still fails) and reported with its seed. TIDEMARK_SEED=<seed> replays one
// case:
//
//	TIDEMARK_SEED=<seed> go test -run '^TestSessionWindowsMatchModel$' ./processor/tidemarktest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// diffSeeds is the seeds of a differential test's cases: the one in
// TIDEMARK_SEED when set, else n seeds counting up from a clock seed.
func diffSeeds(t *testing.T, n int) []uint64 {
	t.Helper()
	if s := os.Getenv("TIDEMARK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		must(t, err)
		t.Logf("replaying seed %d", v)
		return []uint64{v}
	}
	base := uint64(time.Now().UnixNano())
	t.Logf("seeds %d..%d (a failure names its own seed; replay: TIDEMARK_SEED=<seed> go test -run '^%s$' ./processor/tidemarktest)", base, base+uint64(n)-1, t.Name())
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	return seeds
}

// shrink removes records from a failing input while check still reports a
// mismatch: chunks first, then single records, to a local minimum.
func shrink[R any](recs []R, check func([]R) string) []R {
	for chunk := len(recs) / 2; chunk >= 1; chunk /= 2 {
		for removed := true; removed; {
			removed = false
			for i := 0; i+chunk <= len(recs); {
				if cand := slices.Concat(recs[:i], recs[i+chunk:]); check(cand) != "" {
					recs, removed = cand, true
				} else {
					i += chunk
				}
			}
		}
	}
	return recs
}

// ---------------------------------------------------------------------------
// Session windows

type sessCase struct {
	gap, grace int64
	// retention > 0 keeps sessions in the store longer than grace
	// (WithRetention), where closed sessions are found and must be skipped.
	retention int64
	final     bool
}

type sessRec struct {
	Key string
	TS  int64
}

type sessWin struct {
	key        string
	start, end int64
}

// sessionModel is the documented session semantics, brute force: each key
// keeps the timestamps of its records that are in open sessions, and the
// open sessions are recomputed from scratch as the maximal runs whose
// consecutive timestamps are at most gap apart. Stream time is the largest
// timestamp seen (the record included). A session is closed, for good, once
// end + gap ≤ stream time − grace (Kafka Streams' suppression emits it then,
// and its store no longer returns it); a record is late iff the session it
// would form with the open sessions of its key would be closed.
type sessionModel struct {
	gap, grace int64
	observed   int64
	open       map[string][]int64 // key -> timestamps in open sessions
	closed     map[sessWin]int64  // closed sessions -> count
	dropped    int64
}

// clusters cuts sorted timestamps into sessions.
func (m *sessionModel) clusters(ts []int64) [][]int64 {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	var out [][]int64
	for i, t := range ts {
		if i == 0 || t-ts[i-1] > m.gap {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], t)
	}
	return out
}

func (m *sessionModel) add(key string, t int64) {
	m.observed = max(m.observed, t)
	bound := m.observed - m.grace - m.gap // end ≤ bound: closed
	m.close(bound)
	for _, c := range m.clusters(append(slices.Clone(m.open[key]), t)) {
		if slices.Contains(c, t) && c[len(c)-1] <= bound {
			m.dropped++
			return
		}
	}
	m.open[key] = append(m.open[key], t)
}

// close moves the open sessions ending at or before bound to closed.
func (m *sessionModel) close(bound int64) {
	keys := make([]string, 0, len(m.open))
	for k := range m.open {
		keys = append(keys, k)
	}
	for _, k := range keys {
		var keep []int64
		for _, c := range m.clusters(m.open[k]) {
			if c[len(c)-1] <= bound {
				m.closed[sessWin{k, c[0], c[len(c)-1]}] = int64(len(c))
			} else {
				keep = append(keep, c...)
			}
		}
		m.open[k] = keep
	}
}

// all is every session, open or closed, with its count.
func (m *sessionModel) all() map[sessWin]int64 {
	out := maps0(m.closed)
	for k, ts := range m.open {
		for _, c := range m.clusters(ts) {
			out[sessWin{k, c[0], c[len(c)-1]}] = int64(len(c))
		}
	}
	return out
}

func maps0(m map[sessWin]int64) map[sessWin]int64 {
	out := make(map[sessWin]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func genSession(rng *rand.Rand) (sessCase, []sessRec) {
	c := sessCase{gap: 1 + rng.Int64N(20), grace: rng.Int64N(25)}
	if rng.IntN(4) == 0 {
		c.grace = 0
	}
	if rng.IntN(2) == 0 {
		c.retention = c.grace + rng.Int64N(10*c.gap)
	}
	nkeys := 1 + rng.IntN(4)
	n := 10 + rng.IntN(150)
	recs := make([]sessRec, n)
	cur := int64(rng.IntN(50))
	for i := range recs {
		// Mostly steps within the gap, sometimes a pause beyond it.
		if rng.IntN(5) == 0 {
			cur += rng.Int64N(4 * c.gap)
		} else {
			cur += rng.Int64N(c.gap/2 + 2)
		}
		ts := cur
		if rng.IntN(3) == 0 {
			// Up to a few gaps (plus grace) behind: some late, some not.
			ts = max(0, cur-rng.Int64N(3*(c.gap+c.grace)+2))
		}
		recs[i] = sessRec{Key: fmt.Sprintf("k%d", rng.IntN(nkeys)), TS: ts}
	}
	return c, recs
}

// checkSession runs recs through a session count and compares with the
// model; it returns the first mismatches found, or "".
func checkSession(c sessCase, recs []sessRec) (msg string, dropped int64) {
	b := topology.NewBuilder("app")
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	w := topology.SessionWindowsWithGap(time.Duration(c.gap)*time.Millisecond, time.Duration(c.grace)*time.Millisecond)
	opts := []topology.WindowOption{topology.Named("sessions")}
	if c.final {
		opts = append(opts, topology.EmitFinal())
	}
	if c.retention > 0 {
		opts = append(opts, topology.WithRetention(time.Duration(c.retention)*time.Millisecond))
	}
	topology.SessionWindowedBy(g, w).Count(opts...).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		return "build: " + err.Error(), 0
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		return "driver: " + err.Error(), 0
	}
	defer d.Close()
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	m := &sessionModel{gap: c.gap, grace: c.grace, open: map[string][]int64{}, closed: map[sessWin]int64{}}
	for _, r := range recs {
		if err := in.Pipe(r.Key, "", r.TS); err != nil {
			return "pipe: " + err.Error(), 0
		}
		m.add(r.Key, r.TS)
	}
	outs, err := tidemarktest.Output(d, "out", topology.SessionWindowedSerde(serde.String()), serde.Int64()).ReadAll()
	if err != nil {
		return "read: " + err.Error(), 0
	}
	var errs []string
	report := func(f string, args ...any) {
		if len(errs) < 8 {
			errs = append(errs, fmt.Sprintf(f, args...))
		}
	}
	got := map[sessWin]int64{}
	for _, o := range outs {
		w := sessWin{o.Key.Key, o.Key.Start, o.Key.End}
		if o.Timestamp != w.end {
			report("output %v at %d: timestamp is not the session end", w, o.Timestamp)
		}
		switch {
		case c.final && o.Tombstone:
			report("emit final: tombstone for %v", w)
		case c.final:
			if _, dup := got[w]; dup {
				report("emit final: %v emitted twice (%d, then %d)", w, got[w], o.Value)
			}
			got[w] = o.Value
		case o.Tombstone:
			delete(got, w)
		default:
			got[w] = o.Value
		}
	}
	want := m.closed
	what := "final"
	if !c.final {
		want, what = m.all(), "last eager"
	}
	for _, w := range sortedWins(want) {
		if g, ok := got[w]; !ok {
			report("%s: session %v count %d missing", what, w, want[w])
		} else if g != want[w] {
			report("%s: session %v count %d, model %d", what, w, g, want[w])
		}
	}
	for _, w := range sortedWins(got) {
		if _, ok := want[w]; !ok {
			report("%s: session %v count %d not in the model", what, w, got[w])
		}
	}
	if late := d.Metrics().Dropped[topology.DropLate]; late != m.dropped {
		report("dropped %d late records, model %d", late, m.dropped)
	}
	return strings.Join(errs, "\n"), m.dropped
}

func sortedWins(m map[sessWin]int64) []sessWin {
	ws := make([]sessWin, 0, len(m))
	for w := range m {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.start != b.start {
			return a.start < b.start
		}
		return a.end < b.end
	})
	return ws
}

// Random out-of-order input, several keys, random gap and grace: the
// sessions (final results with EmitFinal; the last value per session of the
// eager output otherwise) and the late drops equal the model's.
func TestSessionWindowsMatchModel(t *testing.T) {
	var late, cases int64
	for _, seed := range diffSeeds(t, 1000) {
		rng := rand.New(rand.NewPCG(seed, 0x5e55))
		c, recs := genSession(rng)
		for _, final := range []bool{false, true} {
			c.final = final
			msg, dropped := checkSession(c, recs)
			late += dropped
			cases++
			if msg == "" {
				continue
			}
			small := shrink(recs, func(r []sessRec) string { m, _ := checkSession(c, r); return m })
			smsg, _ := checkSession(c, small)
			t.Errorf("seed %d: gap %dms grace %dms retention %dms (0: default) final %v, %d records:\n%s\nshrunk to %d records %v:\n%s",
				seed, c.gap, c.grace, c.retention, final, len(recs), msg, len(small), small, smsg)
		}
	}
	t.Logf("%d cases, %d late records in the models", cases, late)
	if late == 0 && os.Getenv("TIDEMARK_SEED") == "" {
		t.Errorf("no input had a late record: the generator is too gentle")
	}
}

// ---------------------------------------------------------------------------
// Stream-stream joins

type joinShape int

const (
	shapeInner joinShape = iota
	shapeLeft
	shapeOuter
)

func (s joinShape) String() string { return [...]string{"inner", "left", "outer"}[s] }

type joinCaseP struct {
	kind                 joinShape
	before, after, grace int64
}

type joinStats struct{ pairs, due, atOnce, unretained, joinedAfterUnjoined int }

func (a *joinStats) addUp(b joinStats) {
	a.pairs += b.pairs
	a.due += b.due
	a.atOnce += b.atOnce
	a.unretained += b.unretained
	a.joinedAfterUnjoined += b.joinedAfterUnjoined
}

type joinRec struct {
	Left bool
	Key  string
	TS   int64
	ID   int
}

func (r joinRec) String() string {
	side := "R"
	if r.Left {
		side = "L"
	}
	return fmt.Sprintf("%s%d(%s@%d)", side, r.ID, r.Key, r.TS)
}

func (r joinRec) name() string {
	if r.Left {
		return fmt.Sprintf("L%d", r.ID)
	}
	return fmt.Sprintf("R%d", r.ID)
}

// joinModel is the documented stream-stream join, brute force. Stream time
// is the largest timestamp seen on either side (the record included). A
// left record at t joins every right record of its key in [t−before,
// t+after] that the right store retains (timestamp ≥ the right store's
// clock − max(before + after, before, after) − grace, the store's clock
// the largest timestamp stored on the right, as each of Kafka Streams'
// join stores expires by its own); a right record mirrors it. The output timestamp is the later of
// the pair. For left (and outer) joins an unjoined left (right) record is
// emitted with its own timestamp once stream time > t + after + grace
// (t + before + grace), unless a record joined it before that; one that
// arrives after its window end (stream time > t + after, resp. t + before)
// and joins nothing is emitted at once (Kafka Streams' timeTo <
// streamTime, and the golden transcript of TestGoldenStreamStreamJoin; the
// LeftJoin godoc's "after its window has closed" reads as if grace counted
// here too, which it does not).
type joinModel struct {
	joinCaseP
	observed int64
	// seen is each side's store clock: the largest timestamp of that side.
	seen    map[bool]int64
	stored  []joinRec
	pending map[int]joinRec // by ID
	out     []string
	// What the input exercised, to keep the generator honest.
	stats    joinStats
	unjoined map[int]bool // IDs emitted unjoined
}

func (m *joinModel) emit(key, value string, ts int64) {
	m.out = append(m.out, fmt.Sprintf("%s|%s|%d", key, value, ts))
}

func (m *joinModel) outerSide(left bool) bool {
	return m.kind == shapeOuter || (m.kind == shapeLeft && left)
}

func (m *joinModel) add(r joinRec) {
	m.observed = max(m.observed, r.TS)
	m.seen[r.Left] = max(m.seen[r.Left], r.TS)
	cutOf := func(left bool) int64 { return m.seen[left] - max(m.before+m.after, m.before, m.after) - m.grace }
	// Unjoined records whose window plus grace has passed.
	ids := make([]int, 0, len(m.pending))
	for id := range m.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := m.pending[id]
		look := m.after
		if !p.Left {
			look = m.before
		}
		if p.TS+look+m.grace < m.observed {
			m.stats.due++
			m.emitUnjoined(p)
			delete(m.pending, id)
		}
	}
	back, ahead := m.before, m.after
	if !r.Left {
		back, ahead = m.after, m.before
	}
	found := false
	for _, o := range m.stored {
		if o.Left == r.Left || o.Key != r.Key || o.TS < cutOf(o.Left) || o.TS < r.TS-back || o.TS > r.TS+ahead {
			continue
		}
		found = true
		l, rr := r, o
		if !r.Left {
			l, rr = o, r
		}
		m.emit(r.Key, l.name()+"+"+rr.name(), max(r.TS, o.TS))
		m.stats.pairs++
		if m.unjoined[o.ID] {
			m.stats.joinedAfterUnjoined++
		}
		delete(m.pending, o.ID)
	}
	if r.TS >= cutOf(r.Left) {
		m.stored = append(m.stored, r)
	} else {
		m.stats.unretained++
	}
	if m.outerSide(r.Left) && !found {
		if r.TS+ahead < m.observed {
			m.stats.atOnce++
			m.emitUnjoined(r)
		} else {
			m.pending[r.ID] = r
		}
	}
	m.stored = slices.DeleteFunc(m.stored, func(o joinRec) bool { return o.TS < cutOf(o.Left) })
}

func (m *joinModel) emitUnjoined(r joinRec) {
	m.unjoined[r.ID] = true
	if r.Left {
		m.emit(r.Key, r.name()+"+null", r.TS)
	} else {
		m.emit(r.Key, "null+"+r.name(), r.TS)
	}
}

func genJoin(rng *rand.Rand) (joinCaseP, []joinRec) {
	c := joinCaseP{kind: joinShape(rng.IntN(3)), grace: rng.Int64N(12)}
	d := rng.Int64N(15)
	c.before, c.after = d, d
	switch rng.IntN(4) {
	case 0: // asymmetric
		c.before, c.after = rng.Int64N(15), rng.Int64N(15)
	case 1: // one bound negative: a window that does not contain t, and
		// may reach further back than before + after + grace.
		neg := -(1 + rng.Int64N(5))
		pos := -neg + rng.Int64N(10)
		if rng.IntN(2) == 0 {
			c.before, c.after = neg, pos
		} else {
			c.before, c.after = pos, neg
		}
	}
	if rng.IntN(5) == 0 {
		c.grace = 0
		c.before, c.after = max(c.before, 0), max(c.after, 0)
	}
	span := max(c.before, c.after, 1)
	nkeys := 1 + rng.IntN(3)
	n := 5 + rng.IntN(80)
	recs := make([]joinRec, n)
	cur := int64(rng.IntN(30))
	for i := range recs {
		cur += rng.Int64N(span/2 + 3)
		ts := cur
		if rng.IntN(3) == 0 {
			// Behind stream time: within the window, past it, some past
			// what the stores retain.
			ts = max(0, cur-rng.Int64N(2*(c.before+c.after+c.grace)+3))
		}
		recs[i] = joinRec{Left: rng.IntN(2) == 0, Key: fmt.Sprintf("k%d", rng.IntN(nkeys)), TS: ts, ID: i}
	}
	return c, recs
}

func checkJoin(c joinCaseP, recs []joinRec) (string, joinStats) {
	b := topology.NewBuilder("app")
	l := b.Stream("left", serde.String(), serde.String())
	r := b.Stream("right", serde.String(), serde.String())
	w := topology.JoinWindowsOf(0, time.Duration(c.grace)*time.Millisecond).
		Before(time.Duration(c.before) * time.Millisecond).After(time.Duration(c.after) * time.Millisecond)
	var out topology.Stream[string, string]
	switch c.kind {
	case shapeInner:
		out = l.Join(r, func(_ string, a, b string) string { return a + "+" + b }, w, topology.Named("j"))
	case shapeLeft:
		out = l.LeftJoin(r, func(_ string, a, b string, ok bool) string { return a + "+" + opt(b, ok) }, w, topology.Named("j"))
	case shapeOuter:
		out = l.OuterJoin(r, func(_ string, a string, lok bool, b string, rok bool) string { return opt(a, lok) + "+" + opt(b, rok) }, w, topology.Named("j"))
	}
	out.To("out")
	topo, err := b.Build()
	if err != nil {
		return "build: " + err.Error(), joinStats{}
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		return "driver: " + err.Error(), joinStats{}
	}
	defer d.Close()
	lin := tidemarktest.Input(d, "left", serde.String(), serde.String())
	rin := tidemarktest.Input(d, "right", serde.String(), serde.String())
	m := &joinModel{joinCaseP: c, seen: map[bool]int64{}, pending: map[int]joinRec{}, unjoined: map[int]bool{}}
	for _, rec := range recs {
		in := rin
		if rec.Left {
			in = lin
		}
		if err := in.Pipe(rec.Key, rec.name(), rec.TS); err != nil {
			return "pipe: " + err.Error(), joinStats{}
		}
		m.add(rec)
	}
	outs, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadAll()
	if err != nil {
		return "read: " + err.Error(), joinStats{}
	}
	got := make([]string, len(outs))
	for i, o := range outs {
		got[i] = fmt.Sprintf("%s|%s|%d", o.Key, o.Value, o.Timestamp)
	}
	return multisetDiff(got, m.out), m.stats
}

// multisetDiff describes how got and want differ as multisets, or "".
func multisetDiff(got, want []string) string {
	n := map[string]int{}
	for _, s := range got {
		n[s]++
	}
	for _, s := range want {
		n[s]--
	}
	var extra, missing []string
	for s, k := range n {
		for ; k > 0; k-- {
			extra = append(extra, s)
		}
		for ; k < 0; k++ {
			missing = append(missing, s)
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Sprintf("%d outputs, model %d; not in the model (key|value|ts): %v; missing: %v", len(got), len(want), extra, missing)
}

// Random out-of-order input on both sides, several keys, random (and
// asymmetric) windows and grace: the multiset of join outputs, values and
// timestamps, equals the model's, for inner, left and outer joins.
func TestStreamStreamJoinsMatchModel(t *testing.T) {
	kinds := map[joinShape]int{}
	var total joinStats
	for _, seed := range diffSeeds(t, 2000) {
		rng := rand.New(rand.NewPCG(seed, 0x701))
		c, recs := genJoin(rng)
		kinds[c.kind]++
		msg, st := checkJoin(c, recs)
		total.addUp(st)
		if msg == "" {
			continue
		}
		small := shrink(recs, func(r []joinRec) string { m, _ := checkJoin(c, r); return m })
		smsg, _ := checkJoin(c, small)
		t.Errorf("seed %d: %s join, before %dms after %dms grace %dms, %d records:\n%s\nshrunk to %d records %v:\n%s",
			seed, c.kind, c.before, c.after, c.grace, len(recs), msg, len(small), small, smsg)
	}
	t.Logf("cases per kind: inner %d, left %d, outer %d; model: %d joined pairs, %d unjoined when due, %d unjoined at once, %d records below the retention cut, %d pairs joined after one side went out unjoined",
		kinds[shapeInner], kinds[shapeLeft], kinds[shapeOuter], total.pairs, total.due, total.atOnce, total.unretained, total.joinedAfterUnjoined)
	if os.Getenv("TIDEMARK_SEED") == "" && (total.due == 0 || total.atOnce == 0 || total.unretained == 0 || total.joinedAfterUnjoined == 0) {
		t.Errorf("the generator missed a case the model distinguishes: %+v", total)
	}
}
