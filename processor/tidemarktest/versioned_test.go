package tidemarktest_test

import (
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
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// versionedJoinTopology joins "cart-adds" (sku → quantity) with the
// versioned table "prices" (sku → price, store "prices", history h) three
// ways: inner to "inner", left to "left", and inner with the table filtered
// to even prices to "even"; it also writes the table's updates to
// "price-updates".
func versionedJoinTopology(t *testing.T, h time.Duration) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app")
	prices := b.Table("prices", serde.String(), serde.Int64(), topology.Named("prices"), topology.Versioned(h))
	adds := b.Stream("cart-adds", serde.String(), serde.Int64())
	adds.JoinTable(prices, func(_ string, qty, price int64) string { return fmt.Sprintf("%d x %d", qty, price) }).
		WithSerdes(nil, serde.String()).To("inner")
	adds.LeftJoinTable(prices, func(_ string, qty, price int64, ok bool) string {
		if !ok {
			return fmt.Sprintf("%d x unknown", qty)
		}
		return fmt.Sprintf("%d x %d", qty, price)
	}).WithSerdes(nil, serde.String()).To("left")
	adds.JoinTable(prices.Filter(func(_ string, p int64) bool { return p%2 == 0 }), func(_ string, qty, price int64) string {
		return fmt.Sprintf("%d x %d", qty, price)
	}).WithSerdes(nil, serde.String()).To("even")
	prices.ToStream().To("price-updates")
	topo, err := b.Build()
	must(t, err)
	return topo
}

func TestGoldenVersionedStreamTableJoin(t *testing.T) {
	b := topology.NewBuilder("app")
	prices := b.Table("prices", serde.String(), serde.Int64(), topology.Named("prices"), topology.Versioned(10*time.Second))
	adds := b.Stream("cart-adds", serde.String(), serde.Int64())
	adds.LeftJoinTable(prices, func(_ string, qty, price int64, ok bool) string {
		if !ok {
			return fmt.Sprintf("%d x unknown", qty)
		}
		return fmt.Sprintf("%d x %d", qty, price)
	}).WithSerdes(nil, serde.String()).To("priced")
	prices.ToStream().To("price-updates")
	tr := goldenRun(t, b, "priced", serde.String(), serde.String())
	watch(tr, "price-updates", tidemarktest.Output(tr.d, "price-updates", serde.String(), serde.Int64()))
	pin := tidemarktest.Input(tr.d, "prices", serde.String(), serde.Int64())
	ain := tidemarktest.Input(tr.d, "cart-adds", serde.String(), serde.Int64())
	tr.note("versioned table, history 10s: the cart add joins the price valid at its timestamp")
	pipe(tr, pin, "prices", "sku-1", 100, 1000)
	pipe(tr, pin, "prices", "sku-1", 120, 5000)
	pipe(tr, ain, "cart-adds", "sku-1", 2, 2000)
	pipe(tr, ain, "cart-adds", "sku-1", 3, 5000)
	pipe(tr, ain, "cart-adds", "sku-1", 4, 999)
	tr.note("an out-of-order price update is stored as history but not forwarded (it is not the latest)")
	pipe(tr, pin, "prices", "sku-1", 110, 3000)
	pipe(tr, ain, "cart-adds", "sku-1", 5, 3500)
	pipe(tr, ain, "cart-adds", "sku-1", 6, 2999)
	tr.note("a delete is a version: later cart adds find no price, earlier ones still do")
	pipeDelete(tr, pin, "prices", "sku-1", 7000)
	pipe(tr, ain, "cart-adds", "sku-1", 7, 7000)
	pipe(tr, ain, "cart-adds", "sku-1", 8, 6999)
	tr.note("table stream time 20000, cutoff 10000: older lookups find nothing, older updates are dropped")
	pipe(tr, pin, "prices", "sku-2", 50, 20000)
	pipe(tr, ain, "cart-adds", "sku-2", 9, 19000)
	pipe(tr, ain, "cart-adds", "sku-1", 10, 6999)
	pipe(tr, pin, "prices", "sku-2", 40, 9999)
	pipe(tr, pin, "prices", "sku-2", 45, 10000)
	pipe(tr, ain, "cart-adds", "sku-2", 11, 10001)
	tr.check()
}

// priceVersion is the model's version of a price: all are kept.
type priceVersion struct {
	ts    int64
	price int64
	del   bool
}

// versionedModel is an independent reference of a versioned table and the
// as-of join, for one task: every version is kept and the documented
// retention rules are applied when answering.
type versionedModel struct {
	history int64
	st      int64 // the table's stream time
	prices  map[string][]priceVersion
}

func (m *versionedModel) cutoff() int64 {
	if m.st == math.MinInt64 {
		return m.st
	}
	return m.st - m.history
}

// update applies a table update and says what the table forwards:
// forwarded false, or the new price (del for a delete).
func (m *versionedModel) update(sku string, v priceVersion) (late, forwarded bool) {
	if v.ts < m.cutoff() {
		return true, false
	}
	m.st = max(m.st, v.ts)
	vers := m.prices[sku]
	isLatest := len(vers) == 0 || v.ts >= vers[len(vers)-1].ts
	vers = slices.DeleteFunc(vers, func(o priceVersion) bool { return o.ts == v.ts })
	i := 0
	for i < len(vers) && vers[i].ts < v.ts {
		i++
	}
	m.prices[sku] = slices.Insert(vers, i, v)
	// A delete of a key without a value is forwarded too, as Kafka
	// Streams' KTableSource forwards Change(null, null).
	return false, isLatest
}

func (m *versionedModel) asOf(sku string, ts int64) (int64, bool) {
	vers := m.prices[sku]
	if ts < m.cutoff() {
		// Before the cutoff only the latest version is answered (Kafka
		// Streams' RocksDBVersionedStore.get).
		if n := len(vers); n > 0 && vers[n-1].ts <= ts {
			return vers[n-1].price, !vers[n-1].del
		}
		return 0, false
	}
	for i := len(vers) - 1; i >= 0; i-- {
		if vers[i].ts <= ts {
			return vers[i].price, !vers[i].del
		}
	}
	return 0, false
}

// TestVersionedJoinMatchesModel pipes random price updates (out of order,
// deletes, some older than the history) and random cart adds (timestamps
// before and after the updates, some older than the history) and checks
// every join output, and every forwarded table update, against the model.
func TestVersionedJoinMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for round := range 10 {
		const history = 2000
		d, err := tidemarktest.New(versionedJoinTopology(t, history*time.Millisecond), tidemarktest.WithDefaultPartitions(1))
		must(t, err)
		pin := tidemarktest.Input(d, "prices", serde.String(), serde.Int64())
		ain := tidemarktest.Input(d, "cart-adds", serde.String(), serde.Int64())
		outs := map[string]*tidemarktest.OutputTopic[string, string]{}
		for _, o := range []string{"inner", "left", "even"} {
			outs[o] = tidemarktest.Output(d, o, serde.String(), serde.String())
		}
		updates := tidemarktest.Output(d, "price-updates", serde.String(), serde.Int64())
		m := &versionedModel{history: history, st: math.MinInt64, prices: map[string][]priceVersion{}}
		clock := int64(3000 + r.IntN(3000)) // the runtime drops negative timestamps
		late, held, hits, misses := 0, 0, 0, 0
		for op := range 600 {
			clock += int64(r.IntN(40))
			sku := fmt.Sprintf("sku-%d", r.IntN(5))
			ts := clock - int64(r.IntN(3000)) + 500 // up to 2.5s out of order, and ahead
			if r.IntN(2) == 0 {
				v := priceVersion{ts: ts, price: int64(r.IntN(100)), del: r.IntN(6) == 0}
				if v.del {
					must(t, pin.PipeTombstone(sku, ts))
				} else {
					must(t, pin.Pipe(sku, v.price, ts))
				}
				isLate, fwd := m.update(sku, v)
				if isLate {
					late++
				} else if !fwd {
					held++
				}
				got := readAll(t, updates)
				switch {
				case !fwd && len(got) != 0:
					t.Fatalf("round %d op %d: update %s=%+v forwarded %v, want nothing (late %v)", round, op, sku, v, got, isLate)
				case fwd && (len(got) != 1 || got[0].Key != sku || got[0].Timestamp != ts || got[0].Tombstone != v.del || (!v.del && got[0].Value != v.price)):
					t.Fatalf("round %d op %d: update %s=%+v forwarded %v, want it", round, op, sku, v, got)
				}
				continue
			}
			qty := int64(op)
			must(t, ain.Pipe(sku, qty, ts))
			price, found := m.asOf(sku, ts)
			joined := fmt.Sprintf("%d x %d", qty, price)
			want := map[string][]string{"inner": nil, "left": {fmt.Sprintf("%d x unknown", qty)}, "even": nil}
			if !found {
				misses++
			} else {
				hits++
				want["inner"], want["left"] = []string{joined}, []string{joined}
				if price%2 == 0 {
					want["even"] = []string{joined}
				}
			}
			for name, o := range outs {
				var got []string
				for _, rec := range readAll(t, o) {
					if rec.Key != sku || rec.Timestamp != ts {
						t.Fatalf("round %d op %d: %s got %s@%d for %s@%d", round, op, name, rec.Key, rec.Timestamp, sku, ts)
					}
					got = append(got, rec.Value)
				}
				if !slices.Equal(got, want[name]) {
					t.Fatalf("round %d op %d: cart add %s@%d: %s = %q, want %q (cutoff %d, versions %+v)",
						round, op, sku, ts, name, got, want[name], m.cutoff(), m.prices[sku])
				}
			}
		}
		if round == 0 {
			t.Logf("round 0: %d late updates, %d not forwarded (out of order), %d cart adds joined, %d not", late, held, hits, misses)
		}
		if got := d.Metrics().Dropped[topology.DropLate]; got != int64(late) {
			t.Errorf("round %d: %d updates dropped as late, model %d", round, got, late)
		}
		// The table lists each key's latest value.
		entries, err := tidemarktest.ReadStore(d, "prices", serde.String(), serde.Int64())
		must(t, err)
		var want []tidemarktest.StoreEntry[string, int64]
		for sku, vers := range m.prices {
			if l := vers[len(vers)-1]; !l.del {
				want = append(want, tidemarktest.StoreEntry[string, int64]{Key: sku, Value: l.price, Timestamp: l.ts})
			}
		}
		slices.SortFunc(want, func(a, b tidemarktest.StoreEntry[string, int64]) int { return strings.Compare(a.Key, b.Key) })
		if !slices.Equal(entries, want) {
			t.Errorf("round %d: ReadStore = %+v, want %+v", round, entries, want)
		}
		must(t, d.Close())
	}
}

// countVersionEntries counts the version entries of a versioned store
// (first key byte 1 in store.VersionedKeyValue's layout).
func countVersionEntries(t *testing.T, d *tidemarktest.Driver, name string) int {
	t.Helper()
	s, err := d.Store(name, 0)
	must(t, err)
	n := 0
	must(t, s.(store.KeyValue).Range([]byte{1}, []byte{2}, func(_, _ []byte) bool { n++; return true }))
	return n
}

// The store keeps what the history needs and no more, and after a restore
// from the changelog (a fresh store) the table resumes with the same
// versions and the same cutoff: joins answer as before.
func TestVersionedTableRetentionAndRestore(t *testing.T) {
	topo := versionedJoinTopology(t, time.Second)
	p := &changelogProvider{logs: map[string][]logged{}}
	d, err := tidemarktest.New(topo, tidemarktest.WithStoreProvider(p), tidemarktest.WithDefaultPartitions(1))
	must(t, err)
	pin := tidemarktest.Input(d, "prices", serde.String(), serde.Int64())
	for i := range 100 {
		must(t, pin.Pipe("sku-1", int64(i), int64(i)*100)) // versions at 0..9900
	}
	// Table stream time 9900, cutoff 8900: versions valid at 8900 or later
	// are 8900..9900.
	if n := countVersionEntries(t, d, "prices"); n != 11 {
		t.Errorf("%d versions stored, want 11 (8900..9900)", n)
	}
	must(t, pin.Pipe("sku-2", 7, 10_000))
	must(t, d.Close())

	d, err = tidemarktest.New(topo, tidemarktest.WithStoreProvider(p), tidemarktest.WithDefaultPartitions(1))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	pin = tidemarktest.Input(d, "prices", serde.String(), serde.Int64())
	ain := tidemarktest.Input(d, "cart-adds", serde.String(), serde.Int64())
	left := tidemarktest.Output(d, "left", serde.String(), serde.String())
	// Cutoff 9000 (from stream time 10000, restored with the store).
	must(t, ain.Pipe("sku-1", 1, 9050))
	must(t, ain.Pipe("sku-1", 2, 8999))
	must(t, ain.Pipe("sku-1", 3, 50_000))
	must(t, pin.Pipe("sku-1", 1000, 8950)) // older than the cutoff: dropped
	must(t, ain.Pipe("sku-1", 4, 9000))
	var got []string
	for _, r := range readAll(t, left) {
		got = append(got, r.Value)
	}
	if want := []string{"1 x 90", "2 x unknown", "3 x 99", "4 x 90"}; !slices.Equal(got, want) {
		t.Errorf("after restore: left = %q, want %q", got, want)
	}
	if n := d.Metrics().Dropped[topology.DropLate]; n != 1 {
		t.Errorf("%d late updates dropped after restore, want 1 (at 8950, cutoff 9000)", n)
	}
	// Expiry writes tombstones for the versions it deletes.
	tombs := 0
	for _, l := range p.logs["prices"] {
		if l.value == nil && len(l.key) > 0 && l.key[0] == 1 {
			tombs++
		}
	}
	if n := countVersionEntries(t, d, "prices"); n != 11 || tombs != 90 {
		t.Errorf("%d versions stored, %d version tombstones logged; want 11 (sku-1 9000..9900, sku-2) and 90 (0..8900)", n, tombs)
	}
}

func TestVersionedOptionIsCheckedByBuild(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).GroupByKey().Count(topology.Named("c"), topology.Versioned(time.Hour))
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalidTopology) {
		t.Errorf("Versioned on Count: Build error %v, want ErrInvalidTopology", err)
	}
	b = topology.NewBuilder("app")
	b.Table("t", serde.String(), serde.String(), topology.Versioned(-time.Second))
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalidWindow) {
		t.Errorf("negative history: Build error %v, want ErrInvalidWindow", err)
	}
	b = topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("t"), topology.Versioned(time.Minute))
	topo, err := b.Build()
	must(t, err)
	if info, ok := topo.Store("t"); !ok || !info.Versioned || info.History != time.Minute || info.Timestamped ||
		info.Spec.Kind != store.KindKeyValue || info.Changelog != "app-t-changelog" {
		t.Errorf("store info %+v, want a versioned key-value store logged to app-t-changelog", info)
	}
}

// priceHistory is a Processor API operator on a versioned store: values
// "set:<price>" and "del" write a version at the record's timestamp,
// "ask:<time>" forwards the price as of that time.
type priceHistory struct {
	ctx    topology.ProcessorContext[string, string]
	prices *store.TypedVersioned[string, string]
}

func (p *priceHistory) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	s, err := ctx.Store("price-history")
	if err != nil {
		return err
	}
	// One wrapper per task: it caches the store's observed stream time.
	vs, err := store.NewVersioned(s.(store.KeyValue), 10*time.Second)
	if err != nil {
		return err
	}
	p.prices = store.NewTypedVersioned(vs, serde.String(), serde.String())
	return nil
}

func (p *priceHistory) Process(r topology.Record[string, string]) error {
	op, arg, _ := strings.Cut(r.Value, ":")
	switch op {
	case "set":
		return p.prices.Put(r.Key, r.Timestamp, arg)
	case "del":
		return p.prices.Delete(r.Key, r.Timestamp)
	}
	at, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return err
	}
	v, from, ok, err := p.prices.GetAsOf(r.Key, at)
	if err != nil {
		return err
	}
	answer := "none"
	if ok {
		answer = fmt.Sprintf("%s since %d", v, from)
	}
	return p.ctx.Forward(topology.Record[string, string]{Key: r.Key, Value: answer, Timestamp: r.Timestamp})
}

func (p *priceHistory) Close() error { return nil }

func TestVersionedStoreInProcessorAPI(t *testing.T) {
	b := topology.NewBuilder("app")
	b.AddStore(store.Spec{Name: "price-history", Kind: store.KindKeyValue, Logged: true})
	b.Stream("ops", serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] { return &priceHistory{} },
			topology.Named("history"), topology.WithStores("price-history")).
		To("answers")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "ops", serde.String(), serde.String())
	out := tidemarktest.Output(d, "answers", serde.String(), serde.String())
	for _, op := range []struct {
		value string
		ts    int64
	}{
		{"set:100", 1000}, {"set:120", 5000}, {"set:110", 3000}, {"del", 8000},
		{"ask:999", 9000}, {"ask:1000", 9000}, {"ask:3500", 9000}, {"ask:7999", 9000}, {"ask:8000", 9000},
		{"set:130", 20000}, // stream time 20000: cutoff 10000
		{"ask:9999", 20000}, {"ask:10000", 20000}, {"ask:25000", 20000},
	} {
		must(t, in.Pipe("apple", op.value, op.ts))
	}
	var got []string
	for _, r := range readAll(t, out) {
		got = append(got, r.Value)
	}
	want := []string{"none", "100 since 1000", "110 since 3000", "120 since 5000", "none",
		"none", "none", "130 since 20000"}
	if !slices.Equal(got, want) {
		t.Errorf("answers %q, want %q", got, want)
	}
}
