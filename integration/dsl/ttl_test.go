package dsl_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// ttlOut is one record of a table's change stream: a tombstone has
// tomb set and no value.
type ttlOut struct {
	value string
	ts    int64
	tomb  bool
}

// ttlModel is the reference for a table (count=false) or a count per key
// (count=true) with WithTTL, for one task (one input partition): stream
// time, the live rows, and each key's expected outputs.
type ttlModel struct {
	ttl   int64
	count bool
	st    int64
	rows  map[string]ttlRow
	out   map[string][]ttlOut
}

type ttlRow struct {
	value string
	n     int64
	ts    int64
}

func newTTLModel(ttl int64, count bool) *ttlModel {
	return &ttlModel{ttl: ttl, count: count, st: -1, rows: map[string]ttlRow{}, out: map[string][]ttlOut{}}
}

// apply processes one record as topology/ttl.go documents: stream time
// advances, rows older than stream time − ttl expire (a tombstone stamped
// with the stream time), then a record that would make an expired row is
// dropped and any other is applied.
func (m *ttlModel) apply(r record) {
	m.st = max(m.st, r.ts)
	cut := m.st - m.ttl
	var due []string
	for k, row := range m.rows {
		if row.ts < cut {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int { return cmp.Or(cmp.Compare(m.rows[a].ts, m.rows[b].ts), cmp.Compare(a, b)) })
	for _, k := range due {
		delete(m.rows, k)
		m.out[k] = append(m.out[k], ttlOut{ts: m.st, tomb: true})
	}
	old, found := m.rows[r.key]
	switch {
	case m.count && r.tombstone:
	case m.count:
		ts := r.ts
		if found {
			ts = max(ts, old.ts)
		}
		if ts >= cut {
			m.rows[r.key] = ttlRow{n: old.n + 1, ts: ts}
			m.out[r.key] = append(m.out[r.key], ttlOut{value: strconv.FormatInt(old.n+1, 10), ts: ts})
		}
	case r.ts < cut:
	case r.tombstone: // forwarded even for a key the table does not hold, as KTableSource does
		delete(m.rows, r.key)
		m.out[r.key] = append(m.out[r.key], ttlOut{ts: r.ts, tomb: true})
	default:
		m.rows[r.key] = ttlRow{value: r.value, ts: r.ts}
		m.out[r.key] = append(m.out[r.key], ttlOut{value: r.value, ts: r.ts})
	}
}

// TestTTLAcrossRestart runs a ToTable and a Count with WithTTL on the
// broker: half the input, a stop, a new App with a fresh state dir (the
// stores, their TTL indexes and stream time restored from changelogs and
// committed offsets), the other half. Each key's change stream must match
// the model record for record: rows that expired before the restart stay
// expired, live ones survive it (the count goes on from them) and expire
// on schedule after it, with exactly-once outputs throughout.
func TestTTLAcrossRestart(t *testing.T) {
	const (
		partitions = 2
		ttl        = 1000
		n          = 240
	)
	rng := seeded(t)
	in := kafkatest.NewTopic(t, partitions, nil)
	outT := kafkatest.NewTopic(t, partitions, nil)
	outC := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "ttl")
	build := func() *topology.Topology {
		b := topology.NewBuilder(app, topology.RequireNamedState())
		s := b.Stream(in, serde.String(), serde.String())
		s.ToTable(topology.Named("orders"), topology.WithTTL(ttl*time.Millisecond)).ToStream().To(outT)
		s.GroupByKey().Count(topology.Named("order-count"), topology.WithTTL(ttl*time.Millisecond)).
			MapValues(func(_ string, c int64) string { return strconv.FormatInt(c, 10) }).
			WithSerdes(nil, serde.String()).ToStream().To(outC)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}

	// Time moves forward in small steps with out-of-order and late records
	// and tombstones; the second half starts after a pause of a quarter
	// ttl, so some rows expire right after the restart and some survive.
	// Inputs are drawn until the model says they exercise expiry before,
	// survival across and expiry after the restart (a few draws at most).
	gen := func() []record {
		var recs []record
		now := time.Now().Add(-time.Hour).UnixMilli()
		for i := range n {
			now += rng.Int64N(ttl / 12)
			if i == n/2 {
				now += ttl / 4
			}
			r := record{key: "k" + strconv.Itoa(rng.IntN(12)), value: "v" + strconv.Itoa(i), ts: now}
			if rng.IntN(4) == 0 {
				r.ts -= rng.Int64N(2 * ttl)
			}
			r.tombstone = rng.IntN(8) == 0
			recs = append(recs, r)
		}
		return recs
	}
	type models struct{ tables, counts map[int32]*ttlModel }
	newModels := func() models {
		m := models{map[int32]*ttlModel{}, map[int32]*ttlModel{}}
		for p := range int32(partitions) {
			m.tables[p], m.counts[p] = newTTLModel(ttl, false), newTTLModel(ttl, true)
		}
		return m
	}
	// run feeds half to the models and returns every output so far by key.
	run := func(m models, half []record) (wantT, wantC map[string][]ttlOut) {
		for _, r := range half {
			p := processor.DefaultPartition([]byte(r.key), partitions)
			m.tables[p].apply(r)
			m.counts[p].apply(r)
		}
		wantT, wantC = map[string][]ttlOut{}, map[string][]ttlOut{}
		for p := range int32(partitions) {
			maps.Copy(wantT, m.tables[p].out)
			maps.Copy(wantC, m.counts[p].out)
		}
		return wantT, wantC
	}
	// exercised counts, for the count: expiries before the restart, and
	// keys live at the restart whose next output is an update (survived)
	// or an expiry.
	exercised := func(recs []record) (expiredBefore, survived, expiredAfter int) {
		m := newModels()
		_, before := run(m, recs[:n/2])
		live := map[string]bool{}
		for _, c := range m.counts {
			for k := range c.rows {
				live[k] = true
			}
		}
		_, after := run(m, recs[n/2:])
		for k, o := range before {
			for _, x := range o {
				if x.tomb {
					expiredBefore++
				}
			}
			if live[k] && len(after[k]) > len(o) {
				if after[k][len(o)].tomb {
					expiredAfter++
				} else {
					survived++
				}
			}
		}
		return expiredBefore, survived, expiredAfter
	}
	recs := gen()
	for draws := 1; ; draws++ {
		eb, sv, ea := exercised(recs)
		if eb > 0 && sv > 0 && ea > 0 {
			t.Logf("draw %d: counts: %d expiries before the restart; of the keys live across it, %d updated and %d expired first", draws, eb, sv, ea)
			break
		}
		if draws == 100 {
			t.Fatal("no input in 100 draws exercises expiry before, survival across and expiry after the restart")
		}
		recs = gen()
	}

	check := func(phase, topic string, want map[string][]ttlOut) {
		t.Helper()
		total := 0
		for _, o := range want {
			total += len(o)
		}
		got := byKey(readUntil(t, topic, 60*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= total }))
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Errorf("%s: %s: key %s: %v, want %v", phase, topic, k, got[k], want[k])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %s: outputs for %d keys, want %d", phase, topic, len(got), len(want))
		}
	}

	m := newModels()
	produce(t, in, partitions, recs[:n/2]...)
	wantT, wantC := run(m, recs[:n/2])
	stop := startApp(t, build(), t.TempDir())
	check("before the restart", outT, wantT)
	check("before the restart", outC, wantC)
	stop()

	produce(t, in, partitions, recs[n/2:]...)
	wantT, wantC = run(m, recs[n/2:])
	a, _ := runApp(t, build(), t.TempDir()) // a fresh state dir: restore from changelogs
	check("after the restart", outT, wantT)
	check("after the restart", outC, wantC)

	// Interactive queries answer the live rows only. A query answers the
	// local state, which takes a commit only after its outputs are
	// visible (Apply follows EndTxn): right after the outputs arrive it
	// may still be the previous commit's state, truthfully, at the
	// position it names. Bounded by the input's end, it answers the state
	// the outputs came from.
	fresh := processor.AtLeast(processor.Position{in: kafkatest.StableEnds(t, in)}, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k := range wantT {
		p := processor.DefaultPartition([]byte(k), partitions)
		row, live := m.tables[p].rows[k]
		res, err := a.Get(ctx, "orders", []byte(k), fresh)
		if err != nil {
			t.Fatalf("Get(orders, %s): %v", k, err)
		}
		if res.Found != live || live && string(res.Entries[0].Value) != string(topology.EncodeTimestamped(nil, row.ts, []byte(row.value))) {
			t.Errorf("Get(orders, %s) = %v %v at %v, want found=%v %+v", k, res.Found, res.Entries, res.Position, live, row)
		}
	}
	res, err := a.Range(ctx, "order-count", nil, nil, 0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(m.counts[0].rows) + len(m.counts[1].rows); len(res.Entries) != want {
		t.Errorf("Range(order-count): %d rows at %v, want the %d live ones", len(res.Entries), res.Position, want)
	}
}

// byKey groups a change stream's records by key, in order.
func byKey(rs []*kgo.Record) map[string][]ttlOut {
	m := map[string][]ttlOut{}
	for _, r := range rs {
		m[string(r.Key)] = append(m[string(r.Key)], ttlOut{value: string(r.Value), ts: r.Timestamp.UnixMilli(), tomb: r.Value == nil})
	}
	return m
}

func (o ttlOut) String() string {
	if o.tomb {
		return fmt.Sprintf("⊥@%d", o.ts)
	}
	return fmt.Sprintf("%s@%d", o.value, o.ts)
}
