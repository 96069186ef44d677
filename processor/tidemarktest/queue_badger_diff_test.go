package tidemarktest_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// queueCase is a queue-like operator (one that scans a time-ordered store
// from a floor) under random parameters.
type queueCase struct {
	name  string
	build func(tb *topology.Builder)
	// inputs are the input topics; a record goes to inputs[rec.in].
	inputs []string
}

type queueRec struct {
	in        int
	key, val  string
	ts        int64
	tombstone bool
}

func (r queueRec) String() string {
	if r.tombstone {
		return fmt.Sprintf("%d:%s=nil@%d", r.in, r.key, r.ts)
	}
	return fmt.Sprintf("%d:%s=%s@%d", r.in, r.key, r.val, r.ts)
}

func genQueueCase(rng *rand.Rand) queueCase {
	str := serde.String()
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	grace := rng.Int64N(4) * rng.Int64N(15) // often 0
	win := rng.Int64N(30)
	switch k := rng.IntN(11); k {
	case 0, 1:
		before, after := win, win
		if rng.IntN(2) == 0 {
			before, after = rng.Int64N(30), rng.Int64N(30)
		}
		outer := k == 0
		name := fmt.Sprintf("left-join before=%d after=%d grace=%d", before, after, grace)
		if outer {
			name = "outer" + name[4:]
		}
		return queueCase{name: name, inputs: []string{"l", "r"}, build: func(tb *topology.Builder) {
			l := tb.Stream("l", str, str)
			r := tb.Stream("r", str, str)
			w := topology.JoinWindowsOf(0, ms(grace)).Before(ms(before)).After(ms(after))
			if outer {
				l.OuterJoin(r, func(_ string, a string, aok bool, b string, bok bool) string { return opt(a, aok) + "+" + opt(b, bok) },
					w, topology.Named("j")).To("out")
			} else {
				l.LeftJoin(r, func(_ string, a, b string, ok bool) string { return a + "+" + opt(b, ok) }, w, topology.Named("j")).To("out")
			}
		}}
	case 2:
		limit := rng.Int64N(30)
		return queueCase{name: fmt.Sprintf("suppress limit=%d", limit), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t")).
				Suppress(topology.UntilTimeLimit(ms(limit), topology.BufferConfig{}), topology.Named("sup")).
				ToStream().To("out")
		}}
	case 3:
		gap := 1 + rng.Int64N(20)
		return queueCase{name: fmt.Sprintf("session-final gap=%d grace=%d", gap, grace), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(ms(gap), ms(grace))).
				Count(topology.Named("s"), topology.EmitFinal()).ToStream().
				Map(func(k topology.Windowed[string], v int64) (string, string) {
					return fmt.Sprintf("%s[%d,%d]", k.Key, k.Start, k.End), strconv.FormatInt(v, 10)
				}).WithSerdes(str, str).To("out")
		}}
	case 4:
		w := 1 + rng.Int64N(30)
		return queueCase{name: fmt.Sprintf("dedup window=%d", w), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			tb.Stream("in", str, str).
				Deduplicate(func(_, v string) string { return v }, ms(w), topology.Named("d")).To("out")
		}}
	case 6:
		limit, most := rng.Int64N(30), 1+rng.IntN(6)
		return queueCase{name: fmt.Sprintf("suppress limit=%d max-records=%d", limit, most), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t")).
				Suppress(topology.UntilTimeLimit(ms(limit), topology.BufferConfig{MaxRecords: most}), topology.Named("sup")).
				ToStream().To("out")
		}}
	case 8:
		// A versioned store expires versions from a floor too.
		hist := 1 + rng.Int64N(40)
		return queueCase{name: fmt.Sprintf("versioned join history=%d", hist), inputs: []string{"s", "t"}, build: func(tb *topology.Builder) {
			tab := tb.Table("t", str, str, topology.Named("vt"), topology.Versioned(ms(hist)))
			tb.Stream("s", str, str).LeftJoinTable(tab, func(_ string, a, b string, ok bool) string { return a + "+" + opt(b, ok) }).To("out")
		}}
	case 9:
		d := 1 + rng.Int64N(20)
		return queueCase{name: fmt.Sprintf("sliding d=%d grace=%d", d, grace), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(ms(d), ms(grace))).Count(topology.Named("w")).ToStream().
				Map(func(k topology.Windowed[string], v int64) (string, string) {
					return fmt.Sprintf("%s[%d,%d]", k.Key, k.Start, k.End), strconv.FormatInt(v, 10)
				}).WithSerdes(str, str).To("out")
		}}
	case 10:
		gap := 1 + rng.Int64N(20)
		return queueCase{name: fmt.Sprintf("session gap=%d grace=%d", gap, grace), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(ms(gap), ms(grace))).
				Count(topology.Named("s")).ToStream().
				Map(func(k topology.Windowed[string], v int64) (string, string) {
					return fmt.Sprintf("%s[%d,%d]", k.Key, k.Start, k.End), strconv.FormatInt(v, 10)
				}).WithSerdes(str, str).To("out")
		}}
	case 7:
		ttl := 1 + rng.Int64N(30)
		return queueCase{name: fmt.Sprintf("count ttl=%d", ttl), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			tb.Stream("in", str, str).GroupByKey().Count(topology.Named("c"), topology.WithTTL(ms(ttl))).
				ToStream().MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).WithSerdes(str, str).To("out")
		}}
	default:
		ttl := 1 + rng.Int64N(30)
		return queueCase{name: fmt.Sprintf("ttl=%d", ttl), inputs: []string{"in"}, build: func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t"), topology.WithTTL(ms(ttl))).ToStream().To("out")
		}}
	}
}

// genQueueRecs draws records moving forward in time, a third of them behind
// stream time (some far behind), with equal timestamps and a few keys.
func genQueueRecs(rng *rand.Rand, c queueCase, n int) []queueRec {
	recs := make([]queueRec, n)
	cur := int64(rng.IntN(5))
	nkeys := 1 + rng.IntN(6)
	for i := range recs {
		cur += rng.Int64N(6)
		ts := cur
		if rng.IntN(3) == 0 {
			ts = max(0, cur-rng.Int64N(60))
		}
		recs[i] = queueRec{in: rng.IntN(len(c.inputs)), key: "k" + strconv.Itoa(rng.IntN(nkeys)),
			val: "v" + strconv.Itoa(rng.IntN(n/3+1)), ts: ts, tombstone: rng.IntN(15) == 0}
	}
	return recs
}

// runQueueCase pipes recs through c's topology and returns its output.
// With badger set it runs on the service's Badger task state, committing
// (Flush, Apply) after the records whose index is in commits, so the
// deletes of emitted entries are Badger tombstones under later scans.
func runQueueCase(t *testing.T, c queueCase, recs []queueRec, badger bool, commits map[int]bool) []string {
	t.Helper()
	str := serde.String()
	tb := topology.NewBuilder("app")
	c.build(tb)
	topo, err := tb.Build()
	must(t, err)
	opts := []tidemarktest.Option{tidemarktest.WithDefaultPartitions(1)}
	var task *changelog.TaskState
	if badger {
		db, err := changelog.OpenDB(t.TempDir(), changelog.Options{})
		must(t, err)
		t.Cleanup(func() { _ = db.Close() })
		task = db.NewTaskState(changelog.TaskStateConfig{AppID: "app", Partition: 0, Producer: &ackProducer{next: map[string]int64{}}})
		opts = append(opts, tidemarktest.WithStoreProvider(task))
	}
	d, err := tidemarktest.New(topo, opts...)
	must(t, err)
	defer func() { must(t, d.Close()) }()
	ins := make([]*tidemarktest.InputTopic[string, string], len(c.inputs))
	for i, name := range c.inputs {
		ins[i] = tidemarktest.Input(d, name, str, str)
	}
	out := tidemarktest.Output(d, "out", str, str)
	var got []string
	read := func() {
		rs, err := out.ReadAll()
		must(t, err)
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
		}
	}
	for i, r := range recs {
		if r.tombstone {
			must(t, ins[r.in].PipeTombstone(r.key, r.ts))
		} else {
			must(t, ins[r.in].Pipe(r.key, r.val, r.ts))
		}
		if badger && commits[i] {
			read()
			offsets, err := task.Flush(context.Background())
			must(t, err)
			must(t, task.Apply(offsets))
		}
	}
	read()
	return got
}

// The queue operators that scan from a floor (outer and left joins,
// suppress, emit-final sessions, dedup, TTL) produce on the service's
// Badger stores, committed at random points, exactly what they produce on
// the in-memory stores, over long random runs with records behind stream
// time: a floor above a live entry would leave the entry unemitted on one
// of them. (The in-memory results are checked against reference models by
// the differential tests.)
func TestQueueOperatorsOnBadgerMatchMemory(t *testing.T) {
	seed := diffSeeds(t, 1)[0] // logged; TIDEMARK_SEED replays it
	rng := rand.New(rand.NewPCG(seed, 0x9e))
	for i := range 24 {
		c := genQueueCase(rng)
		recs := genQueueRecs(rng, c, 300+rng.IntN(500))
		commits := map[int]bool{}
		for j := range recs {
			if rng.IntN(20) == 0 {
				commits[j] = true
			}
		}
		want := runQueueCase(t, c, recs, false, nil)
		got := runQueueCase(t, c, recs, true, commits)
		if !slices.Equal(got, want) {
			t.Errorf("seed %d case %d (%s): Badger output differs from memory's: %d records vs %d\nfirst difference: %s\ninput: %v",
				seed, i, c.name, len(got), len(want), firstDiff(got, want), recs)
		}
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %s, want %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other at %d", min(len(got), len(want)))
}

// runQueueTask runs c's topology as the service does on one partition: one
// task on a Badger task state, committing (task and state flushed, the
// state applied, the task's clocks kept) after the records in commits. After
// a record in aborts it aborts instead as the service does
// (session.resetTasks): the state's uncommitted writes are discarded, the
// task is closed and built anew from the last commit's clocks, and the
// records since that commit are processed again. It returns the committed
// output.
func runQueueTask(t *testing.T, c queueCase, recs []queueRec, commits, aborts map[int]bool) []string {
	t.Helper()
	tb := topology.NewBuilder("app")
	c.build(tb)
	topo, err := tb.Build()
	must(t, err)
	db, err := changelog.OpenDB(t.TempDir(), changelog.Options{})
	must(t, err)
	t.Cleanup(func() { _ = db.Close() })
	state := db.NewTaskState(changelog.TaskStateConfig{AppID: "app", Partition: 0, Producer: &ackProducer{next: map[string]int64{}}})
	var committed, pending []string
	collect := task.CollectorFunc(func(_ topology.TaskID, r *topology.OutputRecord) error {
		v := "∅"
		if r.Value != nil {
			v = string(r.Value)
		}
		pending = append(pending, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp))
		return nil
	})
	open := func(resume task.Clocks) *task.Task {
		tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: 0, Stores: state, Output: collect, Resume: resume})
		must(t, err)
		return tk
	}
	var resume task.Clocks
	tk := open(resume)
	defer func() { _ = tk.Close() }()
	aborts = maps.Clone(aborts)
	last := 0 // the first record after the last commit
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		in := &topology.InputRecord{Topic: c.inputs[r.in], Offset: int64(i), Key: []byte(r.key), Timestamp: r.ts}
		if !r.tombstone {
			in.Value = []byte(r.val)
		}
		must(t, tk.Process(in))
		must(t, tk.Flush())
		switch {
		case commits[i] || i == len(recs)-1:
			offsets, err := state.Flush(context.Background())
			must(t, err)
			must(t, state.Apply(offsets))
			committed, pending = append(committed, pending...), nil
			resume, last = tk.Clocks(), i+1
		case aborts[i]:
			delete(aborts, i)
			state.Discard()
			must(t, tk.Close())
			pending = nil
			tk = open(resume)
			i = last - 1
		}
	}
	return committed
}

// An abort rebuilds the task, whose queue operators start without a floor
// (unknown), from the state and clocks of the last commit: the records
// processed again produce what they produced the first time, on the
// service's Badger stores. A floor kept from before the abort, or one the
// rebuilt task set too high, would lose or repeat an emission.
func TestQueueOperatorsAfterAbortMatchUninterrupted(t *testing.T) {
	seed := diffSeeds(t, 1)[0] // logged; TIDEMARK_SEED replays it
	rng := rand.New(rand.NewPCG(seed, 0xab))
	for i := range 16 {
		c := genQueueCase(rng)
		recs := genQueueRecs(rng, c, 300+rng.IntN(400))
		commits, aborts := map[int]bool{}, map[int]bool{}
		for j := range recs {
			switch rng.IntN(25) {
			case 0:
				commits[j] = true
			case 1:
				aborts[j] = true
			}
		}
		want := runQueueTask(t, c, recs, commits, nil)
		got := runQueueTask(t, c, recs, commits, aborts)
		if !slices.Equal(got, want) {
			t.Errorf("seed %d case %d (%s): with %d aborts the committed output differs: %d records vs %d\nfirst difference: %s\ninput: %v",
				seed, i, c.name, len(aborts), len(got), len(want), firstDiff(got, want), recs)
		}
	}
}
