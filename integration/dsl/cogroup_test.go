package dsl_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// cogroupSummary is the aggregate of the real-broker cogroup test, encoded
// as "items=<n> amount=<sum> parcels=<n>": commutative on purpose, since
// the order in which one task interleaves its carts partition with its
// repartition partition depends on timing on a real broker; the order of
// a key's updates is tested in processor/tidemarktest.
type cogroupSummary struct{ items, amount, parcels int64 }

func (s cogroupSummary) String() string {
	return fmt.Sprintf("items=%d amount=%d parcels=%d", s.items, s.amount, s.parcels)
}

func parseCogroupSummary(v string) (s cogroupSummary, err error) {
	_, err = fmt.Sscanf(v, "items=%d amount=%d parcels=%d", &s.items, &s.amount, &s.parcels)
	return s, err
}

var cogroupSummarySerde serde.Serde[cogroupSummary] = serde.Func[cogroupSummary]{
	EncodeFunc: func(dst []byte, s cogroupSummary) ([]byte, error) { return append(dst, s.String()...), nil },
	DecodeFunc: func(b []byte) (cogroupSummary, error) { return parseCogroupSummary(string(b)) },
}

// cogroupTopology cogroups carts (key order id, value an amount) with
// shipments (key parcel id, value "<order>/<parcel>") re-keyed by order
// through a repartition, into one summary per order written to out.
func cogroupTopology(t *testing.T, app, carts, shipments, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app, topology.RequireNamedState())
	c := b.Stream(carts, serde.String(), serde.String()).GroupByKey()
	s := b.Stream(shipments, serde.String(), serde.String()).
		GroupBy(func(_, v string) string { order, _, _ := strings.Cut(v, "/"); return order }, serde.String(), topology.Named("shipments-by-order"))
	c.Cogroup(func(_, v string, agg cogroupSummary) cogroupSummary {
		n, _ := strconv.ParseInt(v, 10, 64)
		agg.items++
		agg.amount += n
		return agg
	}).Cogroup(s, func(_, _ string, agg cogroupSummary) cogroupSummary {
		agg.parcels++
		return agg
	}).Aggregate(func() cogroupSummary { return cogroupSummary{} }, cogroupSummarySerde, topology.Named("order-summary")).
		ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// The cogroup across a restart with a fresh state dir: the second app
// restores the shared aggregate from its changelog and reads the rest of
// both inputs (the shipments through the repartition topic), and the
// outputs are exactly one update per valid input record (exactly-once:
// none lost, none repeated) ending in the model's summary per order, each
// timestamped with the largest timestamp of its order's records.
func TestCogroupAcrossRestart(t *testing.T) {
	rng := seeded(t)
	const partitions = 2
	carts := kafkatest.NewTopic(t, partitions, nil)
	shipments := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "cogroup")

	// Random input: 8 orders, timestamps out of order by up to 5 s,
	// carts with a tombstone now and then (skipped by the aggregation).
	type input struct {
		topic string
		rec   record
		order string
	}
	var ins []input
	now := int64(1_700_000_000_000)
	for i := range 240 {
		now += rng.Int64N(200)
		order := fmt.Sprintf("order-%d", rng.IntN(8))
		ts := now - rng.Int64N(5000)
		switch r := rng.IntN(10); {
		case r < 5:
			ins = append(ins, input{carts, record{key: order, value: strconv.Itoa(1 + rng.IntN(100)), ts: ts}, order})
		case r == 5:
			ins = append(ins, input{carts, record{key: order, tombstone: true, ts: ts}, order})
		default:
			parcel := fmt.Sprintf("parcel-%d", i)
			ins = append(ins, input{shipments, record{key: parcel, value: order + "/" + parcel, ts: ts}, order})
		}
	}

	// The model: the summary and largest timestamp per order, and how
	// many updates the inputs make.
	want := map[string]cogroupSummary{}
	wantTS := map[string]int64{}
	updates := func(ins []input) int {
		n := 0
		for _, in := range ins {
			if in.rec.tombstone {
				continue
			}
			n++
			s := want[in.order]
			if in.topic == carts {
				v, _ := strconv.ParseInt(in.rec.value, 10, 64)
				s.items++
				s.amount += v
			} else {
				s.parcels++
			}
			want[in.order] = s
			wantTS[in.order] = max(wantTS[in.order], in.rec.ts)
		}
		return n
	}
	produceAll := func(ins []input) {
		var c, s []record
		for _, in := range ins {
			if in.topic == carts {
				c = append(c, in.rec)
			} else {
				s = append(s, in.rec)
			}
		}
		produce(t, carts, partitions, c...)
		produce(t, shipments, partitions, s...)
	}

	half := len(ins) / 2
	first := updates(ins[:half])
	produceAll(ins[:half])
	stop := startApp(t, cogroupTopology(t, app, carts, shipments, out), t.TempDir())
	readUntil(t, out, 45*time.Second, func(recs []*kgo.Record) bool { return len(recs) >= first })
	stop()

	total := first + updates(ins[half:])
	produceAll(ins[half:])
	startApp(t, cogroupTopology(t, app, carts, shipments, out), t.TempDir()) // fresh state: restore from the changelog
	recs := kafkatest.ConsumeExactly(t, out, total, 45*time.Second, 3*time.Second)

	got := latest(recs)
	if len(got) != len(want) {
		t.Errorf("%d orders in the output, model %d", len(got), len(want))
	}
	for order, w := range want {
		if got[order] != w.String() {
			t.Errorf("%s: final summary %q, model %q", order, got[order], w)
		}
	}
	lastTS := map[string]int64{}
	for _, r := range recs {
		lastTS[string(r.Key)] = r.Timestamp.UnixMilli()
	}
	for order, ts := range wantTS {
		if lastTS[order] != ts {
			t.Errorf("%s: last update timestamped %d, want %d (the largest of its records)", order, lastTS[order], ts)
		}
	}
}
