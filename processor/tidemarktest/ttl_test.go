package tidemarktest_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// The WithTTL tests check the operators against ttlModel, an independent
// reference written from WithTTL's documented semantics (topology/ttl.go),
// on random inputs with out-of-order, late and tombstone records.

// ttlIn is one input record.
type ttlIn struct {
	key, value string
	ts         int64
	tomb       bool
	nullKey    bool
}

// ttlOut is one output record of a table's change stream (ToStream).
type ttlOut struct {
	Key, Value string
	TS         int64
	Tombstone  bool
}

type ttlRow struct {
	value string
	n     int64
	ts    int64
}

// ttlModel is a table (count=false: latest value per key) or a count per
// key (count=true) with a TTL, in one task.
type ttlModel struct {
	ttl   int64
	count bool
	st    int64
	rows  map[string]ttlRow
	out   []ttlOut
	late  int
	nulls int
}

func newTTLModel(ttl int64, count bool) *ttlModel {
	return &ttlModel{ttl: ttl, count: count, st: -1, rows: map[string]ttlRow{}}
}

func (m *ttlModel) emit(k string, r ttlRow) {
	v := r.value
	if m.count {
		v = strconv.FormatInt(r.n, 10)
	}
	m.out = append(m.out, ttlOut{Key: k, Value: v, TS: r.ts})
}

// advance moves stream time and expires, in (timestamp, key) order,
// every row older than stream time − ttl, each a tombstone out stamped
// with the stream time.
func (m *ttlModel) advance(ts int64) int64 {
	m.st = max(m.st, ts)
	cut := m.st - m.ttl
	var due []string
	for k, r := range m.rows {
		if r.ts < cut {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.rows[a].ts, m.rows[b].ts), cmp.Compare(a, b))
	})
	for _, k := range due {
		delete(m.rows, k)
		m.out = append(m.out, ttlOut{Key: k, TS: m.st, Tombstone: true})
	}
	return cut
}

func (m *ttlModel) apply(in ttlIn) {
	cut := m.advance(in.ts)
	old, found := m.rows[in.key]
	switch {
	case in.nullKey: // dropped, after advancing stream time
		m.nulls++
	case m.count && in.tomb: // skipped by the aggregation
	case m.count:
		ts := in.ts
		if found {
			ts = max(ts, old.ts)
		}
		if ts < cut { // no live count: the new one would be expired
			m.late++
			return
		}
		r := ttlRow{n: old.n + 1, ts: ts}
		m.rows[in.key] = r
		m.emit(in.key, r)
	case in.ts < cut: // a table drops late values and tombstones
		m.late++
	case in.tomb: // forwarded even for a key the table does not hold, as KTableSource does
		delete(m.rows, in.key)
		m.out = append(m.out, ttlOut{Key: in.key, TS: in.ts, Tombstone: true})
	default:
		r := ttlRow{value: in.value, ts: in.ts}
		m.rows[in.key] = r
		m.emit(in.key, r)
	}
}

// ttlInputs are n random records over a few keys: time moves forward in
// small steps, a third of the records are out of order (some by more than
// ttl: late), some are tombstones and some jumps let every key expire.
func ttlInputs(rng *rand.Rand, n int, ttl int64) []ttlIn {
	var in []ttlIn
	now := int64(1000)
	for i := range n {
		now += rng.Int64N(ttl / 4)
		if rng.IntN(40) == 0 {
			now += 2 * ttl // a gap: everything expires
		}
		r := ttlIn{key: "k" + strconv.Itoa(rng.IntN(12)), value: "v" + strconv.Itoa(i), ts: now}
		if rng.IntN(3) == 0 {
			r.ts -= rng.Int64N(2 * ttl)
		}
		r.tomb = rng.IntN(7) == 0
		r.nullKey = rng.IntN(25) == 0
		in = append(in, r)
	}
	return in
}

func pipeTTL(t *testing.T, in *tidemarktest.InputTopic[string, string], r ttlIn) {
	t.Helper()
	if r.nullKey {
		must(t, in.PipeNullKey(r.value, r.ts, 0))
	} else if r.tomb {
		must(t, in.PipeTombstone(r.key, r.ts))
	} else {
		must(t, in.Pipe(r.key, r.value, r.ts))
	}
}

// TestTTLAgainstModel runs Table, ToTable and a Count with WithTTL on
// random inputs and compares, record by record, their change streams, the
// store's content (as queries see it and as it is stored), its index, and
// the late records dropped, with ttlModel's.
func TestTTLAgainstModel(t *testing.T) {
	const ttl = 100
	seed := randomSeed(t)
	cases := []struct {
		name  string
		count bool
		build func(b *topology.Builder)
	}{
		{"Table", false, func(b *topology.Builder) {
			b.Table("in", serde.String(), serde.String(), topology.Named("s"), topology.WithTTL(ttl*time.Millisecond)).ToStream().To("out")
		}},
		{"ToTable", false, func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("s"), topology.WithTTL(ttl*time.Millisecond)).ToStream().To("out")
		}},
		{"Count", true, func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).GroupByKey().
				Count(topology.Named("s"), topology.WithTTL(ttl*time.Millisecond)).
				MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
				WithSerdes(nil, serde.String()).ToStream().To("out")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for run := range 20 {
				rng := rand.New(rand.NewPCG(seed, uint64(run)))
				inputs := ttlInputs(rng, 300, ttl)
				b := topology.NewBuilder("app")
				c.build(b)
				d := newDriver(t, b)
				in := tidemarktest.Input(d, "in", serde.String(), serde.String())
				out := tidemarktest.Output(d, "out", serde.String(), serde.String())
				m := newTTLModel(ttl, c.count)
				for i, r := range inputs {
					pipeTTL(t, in, r)
					m.apply(r)
					var got []ttlOut
					for _, o := range readAll(t, out) {
						got = append(got, ttlOut{o.Key, o.Value, o.Timestamp, o.Tombstone})
					}
					if want := m.out; !slices.Equal(got, want) {
						t.Fatalf("run %d, record %d %+v (stream time %d): out %+v, want %+v", run, i, r, m.st, got, want)
					}
					m.out = nil
				}
				checkTTLStore(t, d, m, fmt.Sprintf("run %d", run))
				dropped := d.Metrics().DroppedBy
				if late, nulls := dropped[task.DropKey{Node: "s", Reason: topology.DropLate}], dropped[task.DropKey{Node: "s", Reason: topology.DropNullKey}]; late != int64(m.late) || nulls != int64(m.nulls) {
					t.Errorf("run %d: dropped %d late and %d null keys, want %d and %d", run, late, nulls, m.late, m.nulls)
				}
			}
		})
	}
}

// checkTTLStore compares store s of d with the model's rows: through
// ReadStore (a query) and raw, with one index entry per row plus the
// stream time entry.
func checkTTLStore(t *testing.T, d *tidemarktest.Driver, m *ttlModel, what string) {
	t.Helper()
	want := map[string]ttlRow{}
	for k, r := range m.rows {
		if m.count {
			r.value = strconv.FormatInt(r.n, 10)
		}
		r.n = 0
		want[k] = r
	}
	got := map[string]ttlRow{}
	if m.count {
		entries, err := tidemarktest.ReadStore(d, "s", serde.String(), serde.Int64())
		must(t, err)
		for _, e := range entries {
			got[e.Key] = ttlRow{value: strconv.FormatInt(e.Value, 10), ts: e.Timestamp}
		}
	} else {
		entries, err := tidemarktest.ReadStore(d, "s", serde.String(), serde.String())
		must(t, err)
		for _, e := range entries {
			got[e.Key] = ttlRow{value: e.Value, ts: e.Timestamp}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: store %v, want %v", what, got, want)
	}
	if rows, index := rawTTLSizes(t, d, "s"); rows != len(want) || index != len(want)+1 {
		t.Errorf("%s: %d stored rows, %d index entries, want %d and %d: expired rows must be deleted, not only hidden", what, rows, index, len(want), len(want)+1)
	}
}

// rawTTLSizes counts the entries of store name and of its TTL index, on
// partition 0.
func rawTTLSizes(t *testing.T, d *tidemarktest.Driver, name string) (rows, index int) {
	t.Helper()
	count := func(name string) int {
		s, err := d.Store(name, 0)
		must(t, err)
		n := 0
		must(t, s.(store.KeyValue).Range(nil, nil, func(_, _ []byte) bool { n++; return true }))
		return n
	}
	return count(name), count(name + "-TTL-INDEX")
}

// TestTTLDownstreamAggregationSubtracts: a count of the rows of an
// expiring table per group (Table.GroupBy.Count) subtracts the rows that
// expire, so it always counts the rows the table holds.
func TestTTLDownstreamAggregationSubtracts(t *testing.T) {
	const ttl = 100
	seed := randomSeed(t)
	group := func(_ string, v string) (string, string) { return "g" + v[len(v)-1:], v }
	for run := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		b := topology.NewBuilder("app")
		b.Table("in", serde.String(), serde.String(), topology.Named("s"), topology.WithTTL(ttl*time.Millisecond)).
			GroupBy(group, serde.String(), serde.String()).Count(topology.Named("groups"))
		d := newDriver(t, b)
		in := tidemarktest.Input(d, "in", serde.String(), serde.String())
		m := newTTLModel(ttl, false)
		for i, r := range ttlInputs(rng, 300, ttl) {
			pipeTTL(t, in, r)
			m.apply(r)
			if i%25 != 24 {
				continue
			}
			want := map[string]int64{}
			for k, row := range m.rows {
				g, _ := group(k, row.value)
				want[g]++
			}
			entries, err := tidemarktest.ReadStore(d, "groups", serde.String(), serde.Int64())
			must(t, err)
			got := map[string]int64{}
			for _, e := range entries {
				if e.Value != 0 {
					got[e.Key] = e.Value
				}
			}
			if !maps.Equal(got, want) {
				t.Fatalf("run %d after record %d (stream time %d): group counts %v, want %v (the live rows')", run, i, m.st, got, want)
			}
		}
	}
}

// TestTTLStoreIsBounded: a stream of fresh keys keeps a store with a TTL
// at the keys of the last ttl, rows and index alike.
func TestTTLStoreIsBounded(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("s"), topology.WithTTL(time.Second))
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	for i := range 20_000 {
		must(t, in.Pipe("key-"+strconv.Itoa(i), "v", int64(i)*10))
		if i%1000 == 999 {
			// Stream time 10i, ttl 1000: the rows of 10i−1000..10i live.
			if rows, index := rawTTLSizes(t, d, "s"); rows != min(i+1, 101) || index != rows+1 {
				t.Fatalf("after %d fresh keys: %d rows, %d index entries, want %d and one more", i+1, rows, index, min(i+1, 101))
			}
		}
	}
}

// TestTTLReadsHideExpiredRows: a stream-table join in the task of an
// expiring table does not see a row that stream time expired, even before
// the table's sweep deleted it; the sweep then forwards the delete.
func TestTTLReadsHideExpiredRows(t *testing.T) {
	b := topology.NewBuilder("app")
	table := b.Table("tin", serde.String(), serde.String(), topology.Named("s"), topology.WithTTL(time.Minute))
	table.ToStream().To("changes")
	b.Stream("sin", serde.String(), serde.String()).
		LeftJoinTable(table, func(_, v, tv string, found bool) string {
			if !found {
				return v + "+none"
			}
			return v + "+" + tv
		}).To("joined")
	d := newDriver(t, b)
	tin := tidemarktest.Input(d, "tin", serde.String(), serde.String())
	sin := tidemarktest.Input(d, "sin", serde.String(), serde.String())
	joined := tidemarktest.Output(d, "joined", serde.String(), serde.String())
	changes := tidemarktest.Output(d, "changes", serde.String(), serde.String())
	must(t, tin.Pipe("a", "A", 1000))
	must(t, tin.Pipe("b", "B", 30_000))
	must(t, sin.Pipe("a", "x", 61_000)) // a lives while stream time ≤ 61000
	must(t, sin.Pipe("a", "y", 61_001)) // now expired; b is not
	must(t, sin.Pipe("b", "z", 61_002))
	var got []string
	for _, r := range readAll(t, joined) {
		got = append(got, r.Key+"="+r.Value)
	}
	if want := []string{"a=x+A", "a=y+none", "b=z+B"}; !slices.Equal(got, want) {
		t.Errorf("joined %q, want %q", got, want)
	}
	var ch []ttlOut
	for _, r := range readAll(t, changes) {
		ch = append(ch, ttlOut{r.Key, r.Value, r.Timestamp, r.Tombstone})
	}
	// The table's stream-time punctuator swept a as soon as stream time
	// (advanced by the stream side) expired it.
	if want := []ttlOut{{"a", "A", 1000, false}, {"b", "B", 30_000, false}, {Key: "a", TS: 61_001, Tombstone: true}}; !slices.Equal(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if _, found, err := tidemarktest.Get(d, "s", "a", serde.String(), serde.String()); err != nil || found {
		t.Errorf("Get(a) found=%v err=%v, want expired", found, err)
	}
}

// TestTTLTableSteps walks through WithTTL's rules on a ToTable with a ttl
// of 10s, one record at a time.
func TestTTLTableSteps(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("s"), topology.WithTTL(10*time.Second)).ToStream().To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())
	tomb := func(k string, ts int64) ttlOut { return ttlOut{Key: k, TS: ts, Tombstone: true} }
	steps := []struct {
		in   ttlIn
		want []ttlOut
		why  string
	}{
		{ttlIn{key: "a", value: "1", ts: 1000}, []ttlOut{{"a", "1", 1000, false}}, "a lives while stream time ≤ 11000"},
		{ttlIn{key: "b", value: "1", ts: 5000}, []ttlOut{{"b", "1", 5000, false}}, "b lives while stream time ≤ 15000"},
		{ttlIn{key: "a", value: "2", ts: 8000}, []ttlOut{{"a", "2", 8000, false}}, "the update moves a's expiry to 18000"},
		{ttlIn{key: "c", value: "1", ts: 15000}, []ttlOut{{"c", "1", 15000, false}}, "b (5000) is not older than 15000 − 10000"},
		{ttlIn{key: "d", value: "1", ts: 15001}, []ttlOut{tomb("b", 15001), {"d", "1", 15001, false}}, "now it is: b expires first, stamped with the stream time"},
		{ttlIn{key: "b", value: "late", ts: 5000}, nil, "late (5000 < 15001 − 10000): dropped, b stays expired"},
		{ttlIn{key: "a", tomb: true, ts: 4000}, nil, "a late tombstone is dropped too: a (8000) is newer and lives"},
		{ttlIn{key: "b", value: "2", ts: 6000}, []ttlOut{{"b", "2", 6000, false}}, "out of order but not late: b is back until 16000"},
		{ttlIn{key: "x", value: "1", ts: 18001}, []ttlOut{tomb("b", 18001), tomb("a", 18001), {"x", "1", 18001, false}}, "b (6000) then a (8000) expire, in timestamp order"},
	}
	for _, s := range steps {
		pipeTTL(t, in, s.in)
		var got []ttlOut
		for _, o := range readAll(t, out) {
			got = append(got, ttlOut{o.Key, o.Value, o.Timestamp, o.Tombstone})
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: out %+v, want %+v", s.why, got, s.want)
		}
	}
	entries, err := tidemarktest.ReadStore(d, "s", serde.String(), serde.String())
	must(t, err)
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	if want := []string{"c", "d", "x"}; !slices.Equal(keys, want) {
		t.Errorf("store keys %q, want %q", keys, want)
	}
	if n := d.Metrics().DroppedBy[task.DropKey{Node: "s", Reason: topology.DropLate}]; n != 2 {
		t.Errorf("%d dropped late, want 2", n)
	}
}
