package tidemarktest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// Order lines ("fk=<product>;q=<n>", fk empty: no product) join products
// ("price=<n>"). The joined value names both inputs, so the model can
// check that a result row was computed from the current value of each.

func fkOfLine(_ string, v string) (string, bool) {
	fk, _, _ := strings.Cut(strings.TrimPrefix(v, "fk="), ";")
	return fk, fk != ""
}

func fkJoinValue(line, product string, found bool) string {
	if !found {
		product = "none"
	}
	return line + "*" + product
}

// fkModel is the reference semantics of a foreign-key join: the join of
// the two tables' current rows, computed from scratch.
type fkModel struct {
	left           bool
	lines          map[string]string
	lineTS         map[string]int64
	products       map[string]string
	productTS      map[string]int64
	linesOfProduct func(string) int
}

func (m *fkModel) result() map[string]string {
	out := map[string]string{}
	for k, v := range m.lines {
		fk, ok := fkOfLine(k, v)
		p, found := m.products[fk]
		found = found && ok
		if found || m.left {
			out[k] = fkJoinValue(v, p, found)
		}
	}
	return out
}

// groups counts the result rows by product ("none" for unjoined rows):
// what an aggregation downstream of the join holds when the join forwards
// correct old values.
func (m *fkModel) groups() map[string]string {
	out := map[string]string{}
	n := map[string]int64{}
	for k, v := range m.result() {
		g := "none"
		if strings.Contains(v, "*price=") {
			g, _ = fkOfLine(k, m.lines[k])
		}
		n[g]++
	}
	for g, c := range n {
		if c != 0 {
			out[g] = strconv.FormatInt(c, 10)
		}
	}
	return out
}

// fkJoin is the tables lines ⋈ products on the line's product, inner or
// left, named "priced".
func fkJoin(b *topology.Builder, left bool) topology.Table[string, string] {
	lines := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
	products := b.Table("products", serde.String(), serde.String(), topology.Named("products"))
	var joined topology.Table[string, string]
	if left {
		joined = lines.LeftJoinOnForeignKey(products, fkOfLine,
			func(_ string, l, p string, found bool) string { return fkJoinValue(l, p, found) }, topology.Named("priced"))
	} else {
		joined = lines.JoinOnForeignKey(products, fkOfLine,
			func(_ string, l, p string) string { return fkJoinValue(l, p, true) }, topology.Named("priced"))
	}
	return joined
}

// fkTopology is lines (2 partitions) ⋈ products (3 partitions) on the
// line's product, to "joined", and the joined rows counted per product,
// to "per-product".
func fkTopology(t *testing.T, left bool) *tidemarktest.Driver {
	b := topology.NewBuilder("shop", topology.RequireNamedState())
	joined := fkJoin(b, left)
	joined.ToStream().To("joined")
	joined.GroupBy(func(k, v string) (string, string) {
		if strings.HasSuffix(v, "*none") {
			return "none", k
		}
		fk, _ := fkOfLine(k, v)
		return fk, k
	}, serde.String(), serde.String(), topology.Named("by-product")).
		Count(topology.Named("per-product-count")).
		MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		ToStream().WithSerdes(nil, serde.String()).To("per-product")
	return newDriver(t, b, tidemarktest.WithPartitions("lines", 2), tidemarktest.WithPartitions("products", 3))
}

// fold applies output records to a table view; a tombstone deletes.
func fold(t *testing.T, into map[string]string, o *tidemarktest.OutputTopic[string, string]) []tidemarktest.OutputRecord[string, string] {
	recs := readAll(t, o)
	for _, r := range recs {
		if r.Tombstone {
			delete(into, r.Key)
		} else {
			into[r.Key] = r.Value
		}
	}
	return recs
}

func diffMaps(got, want map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			fmt.Fprintf(&b, "  %s: got %q want %q\n", k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: got %q, want no row\n", k, got[k])
		}
	}
	return b.String()
}

// Random changes to both tables (foreign-key changes, rows without a
// foreign key, deletes on both sides, out-of-order timestamps): after
// every input the joined table, read from its output topic, equals the
// model's join of the current rows (the driver settles each input before
// the next, so "settled" is after every input), joined rows carry the
// later of the two rows' timestamps (the product's after a product change),
// no tombstone is sent for a row that
// was not there, and an aggregation downstream sees the right old values.
func TestForeignKeyJoinMatchesReferenceModel(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			rng := rand.New(rand.NewPCG(randomSeed(t), 7))
			d := fkTopology(t, left)
			lines := tidemarktest.Input(d, "lines", serde.String(), serde.String())
			products := tidemarktest.Input(d, "products", serde.String(), serde.String())
			joined := tidemarktest.Output(d, "joined", serde.String(), serde.String())
			perProduct := tidemarktest.Output(d, "per-product", serde.String(), serde.String())
			m := &fkModel{left: left, lines: map[string]string{}, lineTS: map[string]int64{},
				products: map[string]string{}, productTS: map[string]int64{}}
			got, gotGroups := map[string]string{}, map[string]string{}
			ts := int64(10_000)
			for i := range 1500 {
				ts += rng.Int64N(1000)
				rts := ts - rng.Int64N(5000) // out of order
				r := rng.IntN(10)
				switch {
				case r < 5: // a line: new, changed, moved to another product, or without one
					k := fmt.Sprintf("line-%d", rng.IntN(40))
					fk := ""
					if rng.IntN(6) > 0 {
						fk = fmt.Sprintf("p%d", rng.IntN(12))
					}
					v := fmt.Sprintf("fk=%s;q=%d", fk, rng.IntN(5))
					must(t, lines.Pipe(k, v, rts))
					m.lines[k], m.lineTS[k] = v, rts
				case r < 6:
					k := fmt.Sprintf("line-%d", rng.IntN(40))
					must(t, lines.PipeTombstone(k, rts))
					delete(m.lines, k)
				case r < 9:
					k := fmt.Sprintf("p%d", rng.IntN(12))
					v := fmt.Sprintf("price=%d", rng.IntN(100))
					must(t, products.Pipe(k, v, rts))
					m.products[k], m.productTS[k] = v, rts
				default:
					k := fmt.Sprintf("p%d", rng.IntN(12))
					must(t, products.PipeTombstone(k, rts))
					delete(m.products, k)
				}
				before := maps.Clone(got)
				for _, rec := range fold(t, got, joined) {
					if rec.Tombstone {
						if _, had := before[rec.Key]; !had {
							t.Fatalf("input %d: tombstone for %s, which had no row", i, rec.Key)
						}
						continue
					}
					before[rec.Key] = rec.Value
					if fk, ok := fkOfLine(rec.Key, m.lines[rec.Key]); ok && strings.Contains(rec.Value, "*price=") {
						// A product change re-joins its lines at its own
						// timestamp (Kafka Streams' ForeignTableJoinProcessorSupplier).
						want := max(m.lineTS[rec.Key], m.productTS[fk])
						if r >= 6 {
							want = rts
						}
						if rec.Timestamp != want {
							t.Fatalf("input %d: %s = %s @%d, want timestamp %d", i, rec.Key, rec.Value, rec.Timestamp, want)
						}
					}
				}
				if diff := diffMaps(got, m.result()); diff != "" {
					t.Fatalf("input %d: joined table differs from the model:\n%s", i, diff)
				}
				fold(t, gotGroups, perProduct)
				for g, n := range gotGroups {
					if n == "0" {
						delete(gotGroups, g)
					}
				}
				if diff := diffMaps(gotGroups, m.groups()); diff != "" {
					t.Fatalf("input %d: rows per product differ from the model:\n%s", i, diff)
				}
			}
			if len(got) == 0 {
				t.Fatal("the join never had a row: the test exercises nothing")
			}
			// A line subscribes to its product only: moving to another
			// product or losing it unsubscribes.
			subs, want := 0, 0
			for p := range int32(3) {
				st, err := d.Store("priced-subscription-store", p)
				must(t, err)
				must(t, st.(store.KeyValue).Range(nil, nil, func(_, _ []byte) bool { subs++; return true }))
			}
			for k, v := range m.lines {
				if _, ok := fkOfLine(k, v); ok {
					want++
				}
			}
			if subs != want {
				t.Fatalf("%d subscriptions stored, want %d (one per line with a product)", subs, want)
			}
		})
	}
}

// The internal topics and stores are named after the operator; the
// subscription topic is co-partitioned with products and the response
// topic with lines, and the driver (as the service) sizes them so: New
// checks co-partitioning and would fail with 2 and 3 partitions otherwise.
func TestForeignKeyJoinInternalTopicsAndStores(t *testing.T) {
	b := topology.NewBuilder("shop")
	lines := b.Table("lines", serde.String(), serde.String(), topology.Named("lines"))
	products := b.Table("products", serde.String(), serde.String(), topology.Named("products"))
	lines.JoinOnForeignKey(products, fkOfLine, func(_ string, l, p string) string { return l + p }, topology.Named("priced")).
		ToStream().To("joined")
	topo, err := b.Build()
	must(t, err)
	var topics []string
	for _, r := range topo.RepartitionTopics() {
		if !r.SizedByReader || r.Partitions != 0 {
			t.Errorf("%s: SizedByReader=%v Partitions=%d, want sized by its reader", r.Name, r.SizedByReader, r.Partitions)
		}
		topics = append(topics, r.Name)
	}
	if want := "shop-priced-subscription-repartition,shop-priced-response-repartition"; strings.Join(topics, ",") != want {
		t.Errorf("repartition topics %v, want %s", topics, want)
	}
	var logs []string
	for _, c := range topo.ChangelogTopics() {
		logs = append(logs, c.Name)
	}
	if want := "shop-lines-changelog,shop-products-changelog,shop-priced-subscription-store-changelog,shop-priced-changelog"; strings.Join(logs, ",") != want {
		t.Errorf("changelogs %v, want %s", logs, want)
	}
	groups := fmt.Sprint(topo.CopartitionGroups())
	for _, want := range []string{"products shop-priced-subscription-repartition", "lines shop-priced-response-repartition"} {
		if !strings.Contains(groups, want) {
			t.Errorf("co-partition groups %s, want one of %s", groups, want)
		}
	}
	if subs := topo.SubTopologies(); len(subs) != 2 {
		t.Errorf("%d sub-topologies, want 2 (lines with the responses, products with the subscriptions)", len(subs))
	}
	for _, parts := range [][2]int32{{2, 3}, {3, 2}, {1, 4}} {
		d, err := tidemarktest.New(topo, tidemarktest.WithPartitions("lines", parts[0]), tidemarktest.WithPartitions("products", parts[1]))
		must(t, err)
		if got := len(d.Tasks()); got != int(parts[0]+parts[1]) {
			t.Errorf("lines %d, products %d partitions: %d tasks, want %d", parts[0], parts[1], got, parts[0]+parts[1])
		}
		must(t, d.Close())
	}
}

// network runs the tasks of a topology with every internal topic
// partition a queue delivered at random moments, as the service's
// sub-topologies run concurrently: responses overtake each other across
// partitions, a left row changes while its subscription travels. The test
// driver, by contrast, settles each input before the next.
type network struct {
	t      *testing.T
	topo   *topology.Topology
	parts  map[string]int32
	tasks  map[topology.TaskID]*task.Task
	queues map[string][]topology.InputRecord // "topic/partition" -> FIFO
	keys   []string                          // queues in creation order, for determinism
	out    map[string][]topology.InputRecord // sink topic -> records in order
	offs   map[string]int64
}

func newNetwork(t *testing.T, topo *topology.Topology, parts map[string]int32) *network {
	n := &network{t: t, topo: topo, parts: parts, tasks: map[topology.TaskID]*task.Task{},
		queues: map[string][]topology.InputRecord{}, out: map[string][]topology.InputRecord{}, offs: map[string]int64{}}
	provider := memstore.NewProvider()
	for _, st := range topo.SubTopologies() {
		var np int32
		for _, topic := range st.SourceTopics {
			np = max(np, parts[topic])
		}
		for p := range np {
			tk, err := task.New(task.Params{Topology: topo, SubTopology: st.ID, Partition: p, Stores: provider,
				Output:         task.CollectorFunc(n.collect),
				PartitionCount: func(topic string) (int32, error) { return parts[topic], nil }})
			must(t, err)
			n.tasks[topology.TaskID{SubTopology: st.ID, Partition: p}] = tk
			t.Cleanup(func() { _ = tk.Close() })
		}
	}
	return n
}

func (n *network) collect(_ topology.TaskID, rec *topology.OutputRecord) error {
	np, ok := n.parts[rec.Topic]
	if !ok {
		return fmt.Errorf("no partition count for %q", rec.Topic)
	}
	p := rec.Partition
	if p < 0 {
		p = task.DefaultPartition(rec.Key, np)
	}
	in := topology.InputRecord{Topic: rec.Topic, Partition: p, Key: slices.Clone(rec.Key), Value: slices.Clone(rec.Value), Timestamp: rec.Timestamp}
	if rec.Value != nil && in.Value == nil {
		in.Value = []byte{}
	}
	if !n.topo.IsRepartitionTopic(rec.Topic) {
		n.out[rec.Topic] = append(n.out[rec.Topic], in)
		return nil
	}
	q := fmt.Sprintf("%s/%d", rec.Topic, p)
	if _, ok := n.queues[q]; !ok {
		n.keys = append(n.keys, q)
	}
	n.queues[q] = append(n.queues[q], in)
	return nil
}

func (n *network) deliver(rec topology.InputRecord) {
	n.t.Helper()
	sub, ok := n.topo.SubTopologyOf(rec.Topic)
	if !ok {
		n.t.Fatalf("no sub-topology reads %q", rec.Topic)
	}
	q := fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)
	rec.Offset = n.offs[q]
	n.offs[q]++
	must(n.t, n.tasks[topology.TaskID{SubTopology: sub, Partition: rec.Partition}].Process(&rec))
}

func (n *network) pipe(topic, key string, value *string, ts int64) {
	rec := topology.InputRecord{Topic: topic, Key: []byte(key), Timestamp: ts,
		Partition: task.DefaultPartition([]byte(key), n.parts[topic])}
	if value != nil {
		rec.Value = []byte(*value)
	}
	n.deliver(rec)
}

// step delivers the head of a random non-empty queue; false when all are
// empty.
func (n *network) step(rng *rand.Rand) bool {
	var ready []string
	for _, q := range n.keys {
		if len(n.queues[q]) > 0 {
			ready = append(ready, q)
		}
	}
	if len(ready) == 0 {
		return false
	}
	q := ready[rng.IntN(len(ready))]
	rec := n.queues[q][0]
	n.queues[q] = n.queues[q][1:]
	n.deliver(rec)
	return true
}

// latest folds a sink topic into its table.
func (n *network) latest(topic string) map[string]string {
	m := map[string]string{}
	for _, r := range n.out[topic] {
		if r.Value == nil {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
	return m
}

// fkNetwork is fkJoin to "joined" over a network of its tasks: lines in 2
// partitions, products in 3.
func fkNetwork(t *testing.T, left bool) *network {
	b := topology.NewBuilder("shop")
	fkJoin(b, left).ToStream().To("joined")
	topo, err := b.Build()
	must(t, err)
	return newNetwork(t, topo, map[string]int32{"lines": 2, "products": 3, "joined": 2,
		"shop-priced-subscription-repartition": 3, "shop-priced-response-repartition": 2})
}

// drain delivers the queued records of the internal topics whose name
// ends in suffix, in order, until none is left (delivering them may queue
// records of other topics, which stay queued).
func (n *network) drain(suffix string) {
	for _, q := range n.keys {
		for strings.HasSuffix(strings.Split(q, "/")[0], suffix) && len(n.queues[q]) > 0 {
			rec := n.queues[q][0]
			n.queues[q] = n.queues[q][1:]
			n.deliver(rec)
		}
	}
}

// An answer made for an earlier version of a row with the same value must
// not pass for the answer to the row's current subscription: line-6 joins
// p0, is deleted (its unsubscribe processed), p0 is deleted, and line-6 is
// set to the same value again while the first answer (p0 found) is still
// travelling. Found by the interleaving test below (seed
// 1796491839407120745): the inner join used to subscribe a row without a
// result "answer only if found", so nothing came after the stale answer.
func TestForeignKeyJoinIgnoresAnAnswerForAnEarlierVersionOfTheSameValue(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			n := fkNetwork(t, left)
			line, price := "fk=p0;q=2", "price=58"
			n.pipe("products", "p0", &price, 1)
			n.pipe("lines", "line-6", &line, 2)
			n.drain("-subscription-repartition") // answered: p0 found, in flight
			n.pipe("lines", "line-6", nil, 3)
			n.drain("-subscription-repartition") // unsubscribed
			n.pipe("products", "p0", nil, 4)     // no subscription left to answer
			n.pipe("lines", "line-6", &line, 5)  // the same value again
			n.drain("-response-repartition")     // the first answer arrives
			for n.step(rand.New(rand.NewPCG(1, 2))) {
			}
			want := map[string]string{}
			if left {
				want["line-6"] = fkJoinValue(line, "", false)
			}
			if diff := diffMaps(n.latest("joined"), want); diff != "" {
				t.Fatalf("joined table differs from the join of the current rows (p0 deleted):\n%s", diff)
			}
		})
	}
}

// With the internal topics delivered in random interleavings, responses
// made for a left value the row no longer has (stale) arrive after fresh
// ones; the join must drop them: whenever everything in flight has been
// delivered, the result equals the model's join of the current rows.
func TestForeignKeyJoinDropsStaleResponsesUnderInterleaving(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			rng := rand.New(rand.NewPCG(randomSeed(t), 11))
			n := fkNetwork(t, left)
			m := &fkModel{left: left, lines: map[string]string{}, lineTS: map[string]int64{},
				products: map[string]string{}, productTS: map[string]int64{}}
			ts, settles, rows := int64(0), 0, 0
			for i := range 20000 {
				if rng.IntN(3) > 0 && n.step(rng) {
					continue
				}
				ts += rng.Int64N(100)
				switch r := rng.IntN(10); {
				case r < 6:
					k := fmt.Sprintf("line-%d", rng.IntN(8))
					fk := ""
					if rng.IntN(6) > 0 {
						fk = fmt.Sprintf("p%d", rng.IntN(5))
					}
					v := fmt.Sprintf("fk=%s;q=%d", fk, rng.IntN(3))
					n.pipe("lines", k, &v, ts)
					m.lines[k] = v
				case r < 7:
					k := fmt.Sprintf("line-%d", rng.IntN(8))
					n.pipe("lines", k, nil, ts)
					delete(m.lines, k)
				case r < 9:
					k := fmt.Sprintf("p%d", rng.IntN(5))
					v := fmt.Sprintf("price=%d", rng.IntN(100))
					n.pipe("products", k, &v, ts)
					m.products[k] = v
				default:
					k := fmt.Sprintf("p%d", rng.IntN(5))
					n.pipe("products", k, nil, ts)
					delete(m.products, k)
				}
				if rng.IntN(40) == 0 || i == 19999 {
					for n.step(rng) {
					}
					settles++
					got := n.latest("joined")
					rows += len(got)
					if diff := diffMaps(got, m.result()); diff != "" {
						t.Fatalf("settled after input %d: joined table differs from the model:\n%s", i, diff)
					}
				}
			}
			if settles < 10 || rows == 0 {
				t.Fatalf("%d settle points with %d rows in all: the test exercises too little", settles, rows)
			}
		})
	}
}

// The foreign-key join's semantics, readable: which changes on either side
// update, delete or leave alone which result rows, and their timestamps.
func TestGoldenForeignKeyJoin(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			b := topology.NewBuilder("shop")
			fkJoin(b, left).ToStream().To("joined")
			tr := goldenRun(t, b, "joined", serde.String(), serde.String())
			ls := tidemarktest.Input(tr.d, "lines", serde.String(), serde.String())
			ps := tidemarktest.Input(tr.d, "products", serde.String(), serde.String())
			tr.note("a joined row is timestamped with the later of the two rows")
			pipe(tr, ps, "products", "p1", "price=10", 1000)
			pipe(tr, ls, "lines", "l1", "fk=p1;q=2", 2000)
			tr.note("a line whose product is missing: no row (inner), an unjoined row (left)")
			pipe(tr, ls, "lines", "l2", "fk=p9;q=1", 3000)
			pipe(tr, ps, "products", "p9", "price=99", 4000)
			tr.note("a product change updates the lines referring to it, also out of order")
			pipe(tr, ps, "products", "p1", "price=12", 1500)
			tr.note("a line moving to another product unsubscribes from the old one")
			pipe(tr, ls, "lines", "l1", "fk=p9;q=2", 5000)
			pipeDelete(tr, ps, "products", "p1", 6000)
			pipe(tr, ps, "products", "p9", "price=98", 6500)
			tr.note("a line losing its product: deleted (inner), unjoined (left)")
			pipe(tr, ls, "lines", "l2", "fk=;q=1", 7000)
			tr.note("deleting a line that has no row sends nothing")
			pipeDelete(tr, ls, "lines", "l3", 7500)
			tr.note("deleting a product deletes (inner) or unjoins (left) the rows referring to it")
			pipeDelete(tr, ps, "products", "p9", 8000)
			tr.note("deleting a line deletes its row, if it has one")
			pipeDelete(tr, ls, "lines", "l1", 9000)
			pipeDelete(tr, ls, "lines", "l2", 9500)
			tr.check()
		})
	}
}
