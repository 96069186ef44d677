package tidemarktest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// globalTopology joins the stream "orders" (value "<merchant>|<payload>",
// "-" as the merchant meaning none: a null mapped key) with the global table
// "merchants" (keyed by []byte, so a nil key is null), inner into
// "joined" and left into "left". orders has 3 partitions and merchants 2:
// a global join needs no co-partitioning.
func globalTopology(t testing.TB) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app", topology.RequireNamedState())
	merchants := b.GlobalTable("merchants", serde.Bytes(), serde.String(), topology.Named("merchants"))
	orders := b.Stream("orders", serde.String(), serde.String())
	keyOf := func(_ string, v string) []byte {
		m, _, _ := strings.Cut(v, "|")
		if m == "-" {
			return nil
		}
		return []byte(m)
	}
	orders.JoinGlobal(merchants, keyOf, func(k, v, m string) string { return k + "/" + v + "@" + m },
		topology.Named("enrich")).To("joined")
	orders.LeftJoinGlobal(merchants, keyOf, func(k, v, m string, found bool) string {
		return fmt.Sprintf("%s/%s@%s:%v", k, v, m, found)
	}, topology.Named("enrich-left")).To("left")
	topo, err := b.Build()
	must(t, err)
	return topo
}

// TestGlobalJoinMatchesModel pipes random interleavings of global updates
// (puts and tombstones, null keys), and stream records (out-of-order and
// late timestamps, null stream keys, tombstones, null mapped keys) and
// checks every output against joiner(stream record, global value at that
// moment) from an independent model: a map updated in pipe order.
func TestGlobalJoinMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	for run := range uint64(20) {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, run))
			d, err := tidemarktest.New(globalTopology(t),
				tidemarktest.WithPartitions("orders", 3), tidemarktest.WithPartitions("merchants", 2))
			must(t, err)
			defer func() { must(t, d.Close()) }()
			gin := tidemarktest.Input(d, "merchants", serde.Bytes(), serde.String())
			sin := tidemarktest.Input(d, "orders", serde.String(), serde.String())
			joined := tidemarktest.Output(d, "joined", serde.String(), serde.String())
			left := tidemarktest.Output(d, "left", serde.String(), serde.String())

			model := map[string]string{}
			type out struct {
				key, value string
				ts         int64
				nullKey    bool
			}
			var wantJoined, wantLeft []out
			var wantNullKeyDrops, wantSkipped int64
			ts := int64(1000)
			for i := range 300 {
				ts += rng.Int64N(100) - 30 // out of order, sometimes late
				m := fmt.Sprintf("m%d", rng.IntN(6))
				switch r := rng.IntN(10); {
				case r < 3: // a global update
					v := fmt.Sprintf("name%d", i)
					must(t, gin.Pipe([]byte(m), v, ts))
					model[m] = v
				case r < 4: // a global tombstone
					must(t, gin.PipeTombstone([]byte(m), ts))
					delete(model, m)
				case r < 5: // a global record with a null key: ignored
					must(t, gin.PipeRecordTo(topology.Record[[]byte, string]{Value: "ignored", Timestamp: ts, NullKey: true}, int32(rng.IntN(2))))
				default: // a stream record
					key := fmt.Sprintf("o%d", rng.IntN(20))
					if rng.IntN(8) == 0 {
						m = "-"
					}
					v := fmt.Sprintf("%s|p%d", m, i)
					rec := topology.Record[string, string]{Key: key, Value: v, Timestamp: ts}
					switch rng.IntN(12) {
					case 0:
						rec.Tombstone, rec.Value = true, ""
					case 1:
						rec.NullKey, rec.Key = true, ""
					}
					must(t, sin.PipeRecordTo(rec, int32(rng.IntN(3))))
					if rec.Tombstone {
						wantSkipped += 2 // both joins skip it
						break
					}
					gv, found := model[m]
					if m == "-" {
						found = false
						wantNullKeyDrops++
					}
					if found {
						wantJoined = append(wantJoined, out{rec.Key, rec.Key + "/" + v + "@" + gv, ts, rec.NullKey})
					}
					wantLeft = append(wantLeft, out{rec.Key, fmt.Sprintf("%s/%s@%s:%v", rec.Key, v, gv, found), ts, rec.NullKey})
				}
			}
			read := func(o *tidemarktest.OutputTopic[string, string]) []out {
				var got []out
				for _, r := range readAll(t, o) {
					got = append(got, out{r.Key, r.Value, r.Timestamp, r.NullKey})
				}
				return got
			}
			for _, c := range []struct {
				name      string
				got, want []out
			}{{"joined", read(joined), wantJoined}, {"left", read(left), wantLeft}} {
				if len(c.got) != len(c.want) {
					t.Fatalf("%s: %d outputs, model %d", c.name, len(c.got), len(c.want))
				}
				for i := range c.got {
					if c.got[i] != c.want[i] {
						t.Fatalf("%s output %d: got %+v, model %+v", c.name, i, c.got[i], c.want[i])
					}
				}
			}
			m := d.Metrics()
			if got := m.Dropped[topology.DropNullKey]; got != wantNullKeyDrops {
				t.Errorf("null-key drops: %d, model %d", got, wantNullKeyDrops)
			}
			if got := m.Dropped[topology.DropSkipped]; got != wantSkipped {
				t.Errorf("skipped: %d, model %d", got, wantSkipped)
			}
			// The store itself: exactly the model, timestamps unwrapped.
			entries, err := tidemarktest.ReadGlobalStore(d, "merchants", serde.String(), serde.String())
			must(t, err)
			if len(entries) != len(model) {
				t.Fatalf("global store has %d keys, model %d", len(entries), len(model))
			}
			for _, e := range entries {
				if model[e.Key] != e.Value {
					t.Fatalf("global store %s=%q, model %q", e.Key, e.Value, model[e.Key])
				}
			}
		})
	}
}

// TestGlobalTableDescribe shows the global store apart from the
// sub-topologies: it generates no tasks, and the joins read it.
func TestGlobalTableDescribe(t *testing.T) {
	topo := globalTopology(t)
	want := `   Global store: merchants (topic: merchants, will not generate tasks)
      --> enrich, enrich-left
`
	if s := topo.String(); !strings.Contains(s, want) {
		t.Fatalf("Describe:\n%s\nwant it to contain:\n%s", s, want)
	}
	dot := topo.Describe().DOT()
	for _, line := range []string{
		`"topic:merchants" -> "store:merchants" [style=bold];`,
		`"node:enrich" -> "store:merchants" [dir=none, style=dashed];`,
		`"node:enrich-left" -> "store:merchants" [dir=none, style=dashed];`,
	} {
		if !strings.Contains(dot, line) {
			t.Errorf("DOT lacks %s:\n%s", line, dot)
		}
	}
	if got := topo.SourceTopics(); strings.Join(got, ",") != "orders" {
		t.Errorf("SourceTopics %v: the global topic must not be consumed by tasks", got)
	}
	if got := topo.GlobalTopics(); strings.Join(got, ",") != "merchants" {
		t.Errorf("GlobalTopics %v", got)
	}
	if len(topo.ChangelogTopics()) != 0 {
		t.Errorf("ChangelogTopics %v: the global topic is the store's changelog", topo.ChangelogTopics())
	}
	if _, ok := topo.Store("merchants"); ok {
		t.Errorf("the global store is not a task store")
	}
}

// TestGlobalTableBuildErrors: misuse fails Build with the operator named.
func TestGlobalTableBuildErrors(t *testing.T) {
	for name, build := range map[string]func(b *topology.Builder){
		"topic also read by a task": func(b *topology.Builder) {
			b.GlobalTable("m", serde.String(), serde.String(), topology.Named("g"))
			b.Stream("m", serde.String(), serde.String()).To("x")
		},
		"unnamed under RequireNamedState": func(b *topology.Builder) {
			g := b.GlobalTable("m", serde.String(), serde.String())
			b.Stream("s", serde.String(), serde.String()).
				JoinGlobal(g, func(k, _ string) string { return k }, func(_, v, _ string) string { return v }).To("x")
		},
		"changelog options": func(b *topology.Builder) {
			b.GlobalTable("m", serde.String(), serde.String(), topology.Named("g"), topology.WithoutChangelog())
			b.Stream("s", serde.String(), serde.String()).To("x")
		},
		"store name clash": func(b *topology.Builder) {
			b.GlobalTable("m", serde.String(), serde.String(), topology.Named("g"))
			b.Table("t", serde.String(), serde.String(), topology.Named("g"))
		},
		"same topic twice": func(b *topology.Builder) {
			b.GlobalTable("m", serde.String(), serde.String(), topology.Named("g1"))
			b.GlobalTable("m", serde.String(), serde.String(), topology.Named("g2"))
			b.Stream("s", serde.String(), serde.String()).To("x")
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := topology.NewBuilder("app", topology.RequireNamedState())
			build(b)
			if _, err := b.Build(); err == nil {
				t.Fatal("Build succeeded")
			} else {
				t.Log(err)
			}
		})
	}
}

// A record the global table's serdes cannot decode fails its pipe, as in
// the service, rather than every later lookup of its key.
func TestUndecodableGlobalRecordFailsItsPipe(t *testing.T) {
	b := topology.NewBuilder("app")
	rates := b.GlobalTable("rates", serde.String(), serde.Int64(), topology.Named("rates"))
	b.Stream("orders", serde.String(), serde.String()).
		LeftJoinGlobal(rates, func(_, v string) string { return v },
			func(_, _ string, rate int64, found bool) string { return fmt.Sprint(rate, found) }).
		To("out")
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo)
	must(t, err)
	defer func() { must(t, d.Close()) }()
	err = tidemarktest.Input(d, "rates", serde.String(), serde.String()).Pipe("m1", "bad", 1)
	if !errors.Is(err, topology.ErrDeserialize) {
		t.Fatalf("piping an undecodable global record: %v, want topology.ErrDeserialize", err)
	}
	must(t, tidemarktest.Input(d, "orders", serde.String(), serde.String()).Pipe("o1", "m1", 2))
	got, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
	must(t, err)
	if len(got) != 1 || got[0].Value != "0 false" {
		t.Fatalf("outputs %q, want one unjoined", got)
	}
}
