package tidemarktest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// The cogroup scenario: a per-order summary from three inputs of three
// value types. carts (item name) and payments (cents) are keyed by order
// id; shipments are keyed by parcel id and carry their order, so they are
// re-keyed by GroupBy (a repartition) before they join the cogroup.

type shipment struct {
	Parcel, Order string
}

// orderSummary is order-sensitive on purpose (Log lists every update in
// the order it was applied), so the tests check the order in which the
// inputs' records reach the shared aggregate, not only their sum.
type orderSummary struct {
	Items   int
	Paid    int64
	Parcels int
	Log     string
}

func addCart(order, item string, s orderSummary) orderSummary {
	s.Items++
	s.Log += "c:" + item + ";"
	return s
}

func addPayment(order string, cents int64, s orderSummary) orderSummary {
	s.Paid += cents
	s.Log += "p:" + strconv.FormatInt(cents, 10) + ";"
	return s
}

func addShipment(order string, sh shipment, s orderSummary) orderSummary {
	s.Parcels++
	s.Log += "s:" + sh.Parcel + ";"
	return s
}

// cogroupInputs builds the three grouped inputs and their cogroup.
func cogroupInputs(b *topology.Builder) topology.CogroupedStream[string, orderSummary] {
	carts := b.Stream("carts", serde.String(), serde.String()).GroupByKey()
	payments := b.Stream("payments", serde.String(), serde.Int64()).GroupByKey()
	shipments := b.Stream("shipments", serde.String(), serde.JSON[shipment]()).
		GroupBy(func(_ string, s shipment) string { return s.Order }, serde.String(), topology.Named("shipments-by-order"))
	return carts.Cogroup(addCart).Cogroup(payments, addPayment).Cogroup(shipments, addShipment)
}

// cogroupEvent is one random input record for the models.
type cogroupEvent struct {
	input     string // carts, payments, shipments
	key       string // order id (parcel id for shipments)
	order     string // the order id the record aggregates under
	item      string
	cents     int64
	parcel    string
	ts        int64
	tombstone bool
	nullKey   bool
}

func (e cogroupEvent) add(s orderSummary) orderSummary {
	switch e.input {
	case "carts":
		return addCart(e.order, e.item, s)
	case "payments":
		return addPayment(e.order, e.cents, s)
	}
	return addShipment(e.order, shipment{Parcel: e.parcel, Order: e.order}, s)
}

// randomCogroupEvents makes n records over keys orders, timestamps moving
// forward by up to step and out of order by up to disorder, with some
// tombstones and null keys (carts and payments only: a shipment's key is
// recomputed from its value).
func randomCogroupEvents(rng *rand.Rand, n, orders int, step, disorder int64) []cogroupEvent {
	var evs []cogroupEvent
	now := int64(1_000_000)
	for i := range n {
		now += rng.Int64N(step)
		e := cogroupEvent{order: fmt.Sprintf("o%d", rng.IntN(orders)), ts: max(0, now-rng.Int64N(disorder))}
		e.key = e.order
		switch rng.IntN(3) {
		case 0:
			e.input, e.item = "carts", fmt.Sprintf("item%d", i)
		case 1:
			e.input, e.cents = "payments", rng.Int64N(10_000)
		default:
			e.input, e.parcel = "shipments", fmt.Sprintf("parcel%d", i)
			e.key = e.parcel
		}
		switch r := rng.IntN(40); {
		case r == 0:
			e.tombstone = true
		case r == 1 && e.input != "shipments":
			e.nullKey = true
		}
		evs = append(evs, e)
	}
	return evs
}

type cogroupPipes struct {
	carts     *tidemarktest.InputTopic[string, string]
	payments  *tidemarktest.InputTopic[string, int64]
	shipments *tidemarktest.InputTopic[string, shipment]
}

func newCogroupPipes(d *tidemarktest.Driver) cogroupPipes {
	return cogroupPipes{
		carts:     tidemarktest.Input(d, "carts", serde.String(), serde.String()),
		payments:  tidemarktest.Input(d, "payments", serde.String(), serde.Int64()),
		shipments: tidemarktest.Input(d, "shipments", serde.String(), serde.JSON[shipment]()),
	}
}

func (p cogroupPipes) pipe(t *testing.T, e cogroupEvent) {
	t.Helper()
	var err error
	switch {
	case e.input == "carts" && e.nullKey:
		err = p.carts.PipeNullKey(e.item, e.ts, 0)
	case e.input == "carts" && e.tombstone:
		err = p.carts.PipeTombstone(e.key, e.ts)
	case e.input == "carts":
		err = p.carts.Pipe(e.key, e.item, e.ts)
	case e.input == "payments" && e.nullKey:
		err = p.payments.PipeNullKey(e.cents, e.ts, 0)
	case e.input == "payments" && e.tombstone:
		err = p.payments.PipeTombstone(e.key, e.ts)
	case e.input == "payments":
		err = p.payments.Pipe(e.key, e.cents, e.ts)
	case e.tombstone:
		err = p.shipments.PipeTombstone(e.key, e.ts)
	default:
		err = p.shipments.Pipe(e.key, shipment{Parcel: e.parcel, Order: e.order}, e.ts)
	}
	must(t, err)
}

// kvUpdate is one emitted aggregate update.
type kvUpdate struct {
	key string
	agg orderSummary
	ts  int64
}

// Random records of three inputs, spread over three partitions and out of
// order, with tombstones and null keys, must give exactly the model's
// updates: one per record that is neither a tombstone nor null-keyed, in
// processing order, each the previous aggregate of its key folded with
// that record's own adder, timestamped with the largest timestamp the key
// has seen.
func TestCogroupAggregateMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	for round := range uint64(4) {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, round))
			b := topology.NewBuilder("app")
			cogroupInputs(b).Aggregate(func() orderSummary { return orderSummary{Log: "|"} }, serde.JSON[orderSummary](), topology.Named("order-summary")).
				ToStream().To("summaries")
			d := newDriver(t, b, tidemarktest.WithDefaultPartitions(3))
			p := newCogroupPipes(d)
			out := tidemarktest.Output(d, "summaries", serde.String(), serde.JSON[orderSummary]())

			// The model: a map from key to (aggregate, largest timestamp).
			type state struct {
				agg orderSummary
				ts  int64
			}
			model := map[string]state{}
			var want []kvUpdate
			var skipped, nullKeys int64
			for _, e := range randomCogroupEvents(rng, 600, 12, 300, 5000) {
				p.pipe(t, e)
				switch {
				case e.nullKey:
					nullKeys++
					continue
				case e.tombstone:
					skipped++
					continue
				}
				s, ok := model[e.order]
				if !ok {
					s = state{agg: orderSummary{Log: "|"}, ts: e.ts}
				}
				s.agg, s.ts = e.add(s.agg), max(s.ts, e.ts)
				model[e.order] = s
				want = append(want, kvUpdate{e.order, s.agg, s.ts})
			}

			var got []kvUpdate
			for _, r := range readAll(t, out) {
				got = append(got, kvUpdate{r.Key, r.Value, r.Timestamp})
			}
			// One sequence per key: the driver processes every record,
			// repartitioned ones included, before the next is piped, but
			// compare per key so the test states only what holds on Kafka.
			if g, w := byKey(got), byKey(want); !equalUpdates(g, w) {
				for k := range w {
					if !slices.Equal(g[k], w[k]) {
						t.Errorf("key %s: got %d updates %v\nwant %d updates %v", k, len(g[k]), g[k], len(w[k]), w[k])
					}
				}
				t.Fatalf("updates differ from the model (%d got, %d want)", len(got), len(want))
			}
			if len(want) < 500 {
				t.Fatalf("only %d updates: the input is too gentle", len(want))
			}
			m := d.Metrics()
			if n := m.DroppedBy[task.DropKey{Node: "order-summary", Reason: topology.DropSkipped}]; n != skipped {
				t.Errorf("aggregation skipped %d tombstones, model %d", n, skipped)
			}
			if n := m.DroppedBy[task.DropKey{Node: "order-summary", Reason: topology.DropNullKey}]; n != nullKeys {
				t.Errorf("aggregation dropped %d null keys, model %d", n, nullKeys)
			}
			if skipped == 0 || nullKeys == 0 {
				t.Errorf("the input should include tombstones (%d) and null keys (%d)", skipped, nullKeys)
			}
		})
	}
}

func byKey(us []kvUpdate) map[string][]kvUpdate {
	m := map[string][]kvUpdate{}
	for _, u := range us {
		m[u.key] = append(m[u.key], u)
	}
	return m
}

func equalUpdates(a, b map[string][]kvUpdate) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if !slices.Equal(a[k], v) {
			return false
		}
	}
	return true
}

// winUpdate is one emitted windowed aggregate (an update, or a final
// result with EmitFinal).
type winUpdate struct {
	key        string
	start, end int64
	agg        orderSummary
	ts         int64
}

func (u winUpdate) String() string {
	return fmt.Sprintf("%s@[%d,%d)=%q@%d", u.key, u.start, u.end, u.agg.Log, u.ts)
}

// cogroupWindowModel is the reference semantics of a windowed cogroup:
// Kafka Streams' windowed aggregation, with one clock (the largest
// timestamp of any input's accepted record) for all inputs.
type cogroupWindowModel struct {
	size, advance, grace int64
	final                bool
	clock                int64
	windows              map[string]*winUpdate // "key@start"
	emitted              map[string]bool       // final results already out
	late                 int64
	out                  []winUpdate
}

func (m *cogroupWindowModel) add(e cogroupEvent) {
	m.clock = max(m.clock, e.ts)
	closed := m.clock - m.grace
	late := false
	// Every window [start, start+size) with start a multiple of advance
	// that contains ts (and starts at 0 or later), ascending.
	var starts []int64
	for start := e.ts - e.ts%m.advance; start > e.ts-m.size && start >= 0; start -= m.advance {
		starts = append([]int64{start}, starts...)
	}
	for _, start := range starts {
		w := fmt.Sprintf("%s@%d", e.order, start)
		if start+m.size <= closed {
			late = true
			continue
		}
		u, ok := m.windows[w]
		if !ok {
			u = &winUpdate{key: e.order, start: start, end: start + m.size, agg: orderSummary{Log: "|"}, ts: e.ts}
			m.windows[w] = u
		}
		u.agg, u.ts = e.add(u.agg), max(u.ts, e.ts)
		if !m.final {
			m.out = append(m.out, *u)
		}
	}
	if late {
		m.late++
	}
	if m.final {
		var due []winUpdate
		for w, u := range m.windows {
			if u.end <= closed && !m.emitted[w] {
				m.emitted[w] = true
				due = append(due, *u)
			}
		}
		sort.Slice(due, func(i, j int) bool {
			if due[i].start != due[j].start {
				return due[i].start < due[j].start
			}
			return due[i].key < due[j].key
		})
		m.out = append(m.out, due...)
	}
}

// Random records of three inputs, out of order by more than the grace
// (so some are late), must give exactly the model's windowed results: every
// update in order, or with EmitFinal every final result once, and the
// model's count of late records. One partition: the operator's clock is
// per task, and the model keeps one.
func TestCogroupWindowedAggregateMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	shapes := []struct {
		name                 string
		size, advance, grace time.Duration
		final                bool
	}{
		{"tumbling", 10 * time.Second, 10 * time.Second, 2 * time.Second, false},
		{"hopping", 10 * time.Second, 4 * time.Second, 3 * time.Second, false},
		{"tumbling emit-final", 10 * time.Second, 10 * time.Second, 2 * time.Second, true},
		{"hopping emit-final", 10 * time.Second, 4 * time.Second, 3 * time.Second, true},
	}
	for i, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			b := topology.NewBuilder("app")
			opts := []topology.WindowOption{topology.Named("order-windows")}
			if sh.final {
				opts = append(opts, topology.EmitFinal())
			}
			topology.CogroupWindowedBy(cogroupInputs(b), topology.HoppingWindows(sh.size, sh.advance, sh.grace)).
				Aggregate(func() orderSummary { return orderSummary{Log: "|"} }, serde.JSON[orderSummary](), opts...).
				ToStream().To("windows")
			d := newDriver(t, b)
			p := newCogroupPipes(d)
			out := tidemarktest.Output(d, "windows", topology.TimeWindowedSerde(serde.String(), sh.size), serde.JSON[orderSummary]())
			m := &cogroupWindowModel{size: sh.size.Milliseconds(), advance: sh.advance.Milliseconds(), grace: sh.grace.Milliseconds(),
				final: sh.final, clock: -1, windows: map[string]*winUpdate{}, emitted: map[string]bool{}}
			for _, e := range randomCogroupEvents(rng, 600, 8, 400, 8000) {
				p.pipe(t, e)
				if !e.nullKey && !e.tombstone {
					m.add(e)
				}
			}
			var got []winUpdate
			for _, r := range readAll(t, out) {
				got = append(got, winUpdate{r.Key.Key, r.Key.Start, r.Key.End, r.Value, r.Timestamp})
			}
			if !slices.Equal(got, m.out) {
				n := 0
				for n < min(len(got), len(m.out)) && got[n] == m.out[n] {
					n++
				}
				t.Fatalf("results differ from the model from result %d on (%d got, %d want):\ngot  %v\nwant %v",
					n, len(got), len(m.out), got[n:min(len(got), n+5)], m.out[n:min(len(m.out), n+5)])
			}
			if n := d.Metrics().DroppedBy[task.DropKey{Node: "order-windows", Reason: topology.DropLate}]; n != m.late {
				t.Errorf("dropped %d late records, model %d", n, m.late)
			}
			if m.late == 0 || len(m.out) < 80 {
				t.Errorf("%d late records, %d results: the input should include late records and many results", m.late, len(m.out))
			}
		})
	}
}

// A session-windowed cogroup merges sessions across inputs: a payment
// between two cart sessions of an order bridges them.
func TestGoldenCogroupSessions(t *testing.T) {
	b := topology.NewBuilder("app")
	carts := b.Stream("carts", serde.String(), serde.String()).GroupByKey()
	payments := b.Stream("payments", serde.String(), serde.Int64()).GroupByKey()
	cg := carts.Cogroup(func(_, item, s string) string { return s + item + "," }).
		Cogroup(payments, func(_ string, cents int64, s string) string { return s + strconv.FormatInt(cents, 10) + "," })
	topology.CogroupSessionWindowedBy(cg, topology.SessionWindowsWithGap(5*time.Second, 10*time.Second)).
		Aggregate(func() string { return "" }, func(_, a, b string) string { return a + b }, serde.String(), topology.Named("order-sessions")).
		ToStream().To("sessions")
	tr := goldenRun(t, b, "sessions", topology.SessionWindowedSerde(serde.String()), serde.String())
	c := tidemarktest.Input(tr.d, "carts", serde.String(), serde.String())
	p := tidemarktest.Input(tr.d, "payments", serde.String(), serde.Int64())
	tr.note("two cart sessions of o1, 10s apart, gap 5s, grace 10s")
	pipe(tr, c, "carts", "o1", "apple", 1000)
	pipe(tr, c, "carts", "o1", "pear", 11000)
	tr.note("a payment at 6000 is within the gap of both: it merges them (merge in session order, then add)")
	pipe(tr, p, "payments", "o1", 250, 6000)
	tr.note("another order's payment has its own session")
	pipe(tr, p, "payments", "o2", 99, 7000)
	tr.check()
}

// The cogroup's result is a table like GroupedStream.Aggregate's: table
// operators downstream of it read its store.
func TestCogroupResultIsATable(t *testing.T) {
	b := topology.NewBuilder("app")
	cogroupInputs(b).Aggregate(func() orderSummary { return orderSummary{} }, serde.JSON[orderSummary](), topology.Named("order-summary")).
		MapValues(func(_ string, s orderSummary) string {
			return fmt.Sprintf("%d items, %d paid, %d parcels", s.Items, s.Paid, s.Parcels)
		}).
		ToStream().WithSerdes(nil, serde.String()).To("lines")
	d := newDriver(t, b)
	p := newCogroupPipes(d)
	p.pipe(t, cogroupEvent{input: "carts", key: "o1", order: "o1", item: "apple", ts: 1})
	p.pipe(t, cogroupEvent{input: "payments", key: "o1", order: "o1", cents: 300, ts: 2})
	p.pipe(t, cogroupEvent{input: "shipments", key: "parcel9", order: "o1", parcel: "parcel9", ts: 3})
	got := readKV(t, tidemarktest.Output(d, "lines", serde.String(), serde.String()))
	want := []kv{{"o1", "1 items, 0 paid, 0 parcels"}, {"o1", "1 items, 300 paid, 0 parcels"}, {"o1", "1 items, 300 paid, 1 parcels"}}
	if !slices.Equal(got, want) {
		t.Errorf("lines %v, want %v", got, want)
	}
}

// A re-keyed input's repartition topic is sized like the other inputs
// (carts, 2 partitions, though shipments has 4), as in Kafka Streams, or
// by WithPartitions; inputs read from user topics with different counts
// cannot be co-partitioned: the runtime refuses to start, naming the
// cogroup.
func TestCogroupRequiresCopartitionedInputs(t *testing.T) {
	build := func(opts ...topology.RepartitionOption) *topology.Topology {
		b := topology.NewBuilder("app")
		carts := b.Stream("carts", serde.String(), serde.String()).GroupByKey()
		shipments := b.Stream("shipments", serde.String(), serde.JSON[shipment]()).
			GroupBy(func(_ string, s shipment) string { return s.Order }, serde.String(), append(opts, topology.Named("shipments-by-order"))...)
		carts.Cogroup(func(_, _ string, n int64) int64 { return n + 1 }).
			Cogroup(shipments, func(_ string, _ shipment, n int64) int64 { return n + 1 }).
			Aggregate(nil, serde.Int64(), topology.Named("order-events")).ToStream().To("out")
		topo, err := b.Build()
		must(t, err)
		return topo
	}
	parts := []tidemarktest.Option{tidemarktest.WithPartitions("carts", 2), tidemarktest.WithPartitions("shipments", 4)}
	b := topology.NewBuilder("app")
	carts := b.Stream("carts", serde.String(), serde.String()).GroupByKey()
	b.Stream("payments", serde.String(), serde.Int64()).GroupByKey().
		Cogroup(func(_ string, _ int64, n int64) int64 { return n + 1 }).
		Cogroup(carts, func(_, _ string, n int64) int64 { return n + 1 }).
		Aggregate(nil, serde.Int64(), topology.Named("order-events")).ToStream().To("out")
	topo, err := b.Build()
	must(t, err)
	_, err = tidemarktest.New(topo, tidemarktest.WithPartitions("carts", 2), tidemarktest.WithPartitions("payments", 4))
	if !errors.Is(err, topology.ErrNotCopartitioned) || !strings.Contains(err.Error(), `"order-events"`) {
		t.Fatalf("carts 2 partitions, payments 4: New = %v, want ErrNotCopartitioned naming order-events", err)
	}
	for _, opts := range [][]topology.RepartitionOption{nil, {topology.WithPartitions(2)}} {
		d, err := tidemarktest.New(build(opts...), parts...)
		must(t, err)
		t.Cleanup(func() { must(t, d.Close()) })
		checkCopartitionedCogroup(t, d)
	}
}

func checkCopartitionedCogroup(t *testing.T, d *tidemarktest.Driver) {
	t.Helper()
	p := newCogroupPipes(d)
	out := tidemarktest.Output(d, "out", serde.String(), serde.Int64())
	for i := range 20 {
		order := fmt.Sprintf("o%d", i%5)
		p.pipe(t, cogroupEvent{input: "carts", key: order, order: order, item: "x", ts: int64(i)})
		p.pipe(t, cogroupEvent{input: "shipments", key: fmt.Sprintf("parcel%d", i), order: order, parcel: fmt.Sprintf("parcel%d", i), ts: int64(i)})
	}
	final := map[string]int64{}
	for _, r := range readAll(t, out) {
		final[r.Key] = r.Value
	}
	for i := range 5 {
		if n := final[fmt.Sprintf("o%d", i)]; n != 8 {
			t.Errorf("o%d: %d events aggregated, want 8 (4 carts, 4 shipments, all in one task)", i, n)
		}
	}
}
