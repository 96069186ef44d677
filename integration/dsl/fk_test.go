package dsl_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Order lines ("fk=<product>;q=<n>", fk empty: no product) joined with
// products ("price=<n>") on the line's product, inner and left, by one
// application: lines has 2 partitions, products 3, so the subscription and
// response topics must be created with 3 and 2.

func lineProduct(_ string, v string) (string, bool) {
	fk, _, _ := strings.Cut(strings.TrimPrefix(v, "fk="), ";")
	return fk, fk != ""
}

func fkTopo(t *testing.T, app, lines, products, inner, left string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app, topology.RequireNamedState())
	l := b.Table(lines, serde.String(), serde.String(), topology.Named("lines"))
	p := b.Table(products, serde.String(), serde.String(), topology.Named("products"))
	l.JoinOnForeignKey(p, lineProduct, func(_ string, line, product string) string { return line + "*" + product },
		topology.Named("priced")).ToStream().To(inner)
	l.LeftJoinOnForeignKey(p, lineProduct, func(_ string, line, product string, found bool) string {
		if !found {
			product = "none"
		}
		return line + "*" + product
	}, topology.Named("priced-or-not")).ToStream().To(left)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// fkJoinModel joins the tables' final rows.
func fkJoinModel(lines, products map[string]string, left bool) map[string]string {
	out := map[string]string{}
	for k, v := range lines {
		fk, ok := lineProduct(k, v)
		p, found := products[fk]
		switch {
		case ok && found:
			out[k] = v + "*" + p
		case left:
			out[k] = v + "*none"
		}
	}
	return out
}

// checkTombstones fails when an output deletes a row it never had: the
// result store lost track of a row (e.g. it was not restored).
func checkTombstones(t *testing.T, topic string, recs []*kgo.Record) {
	t.Helper()
	m := map[string]bool{}
	for _, r := range recs {
		if r.Value == nil && !m[string(r.Key)] {
			t.Errorf("%s: tombstone for %s, which had no row", topic, r.Key)
		}
		m[string(r.Key)] = r.Value != nil
	}
}

// The join across a restart onto a fresh state directory: the second App
// restores the tables, the subscriptions and the results from their
// changelogs and resumes the internal topics from the committed offsets,
// then processes changes to the rows of the first half (foreign keys
// moving, rows losing them, deletes on both sides).
func TestForeignKeyJoinAcrossRestart(t *testing.T) {
	rng := seeded(t)
	lines, products := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 3, nil)
	inner, left := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	app := kafkatest.UniqueName(t, "fk")

	lineRows, productRows := map[string]string{}, map[string]string{}
	var half [2][2][]record // [half][lines, products]
	ts := time.Now().Add(-time.Hour).UnixMilli()
	for h := range 2 {
		for range 150 {
			ts += rng.Int64N(1000)
			rts := ts - rng.Int64N(3000) // out of order
			switch r := rng.IntN(10); {
			case r < 5:
				k := fmt.Sprintf("line-%d", rng.IntN(30))
				fk := ""
				if rng.IntN(6) > 0 {
					fk = fmt.Sprintf("p%d", rng.IntN(10))
				}
				v := fmt.Sprintf("fk=%s;q=%d", fk, rng.IntN(5))
				half[h][0] = append(half[h][0], record{key: k, value: v, ts: rts})
				lineRows[k] = v
			case r < 6:
				k := fmt.Sprintf("line-%d", rng.IntN(30))
				half[h][0] = append(half[h][0], record{key: k, tombstone: true, ts: rts})
				delete(lineRows, k)
			case r < 9:
				k := fmt.Sprintf("p%d", rng.IntN(10))
				v := fmt.Sprintf("price=%d", rng.IntN(100))
				half[h][1] = append(half[h][1], record{key: k, value: v, ts: rts})
				productRows[k] = v
			default:
				k := fmt.Sprintf("p%d", rng.IntN(10))
				half[h][1] = append(half[h][1], record{key: k, tombstone: true, ts: rts})
				delete(productRows, k)
			}
		}
		if h == 0 {
			want := [2]map[string]string{fkJoinModel(lineRows, productRows, false), fkJoinModel(lineRows, productRows, true)}
			produce(t, lines, 2, half[0][0]...)
			produce(t, products, 3, half[0][1]...)
			stop := startApp(t, fkTopo(t, app, lines, products, inner, left), t.TempDir())
			for i, topic := range []string{inner, left} {
				readUntil(t, topic, 40*time.Second, func(recs []*kgo.Record) bool { return maps.Equal(latest(recs), want[i]) })
			}
			stop()
		}
	}
	produce(t, lines, 2, half[1][0]...)
	produce(t, products, 3, half[1][1]...)
	startApp(t, fkTopo(t, app, lines, products, inner, left), t.TempDir())
	for i, topic := range []string{inner, left} {
		want := fkJoinModel(lineRows, productRows, i == 1)
		var got map[string]string
		recs := readUntil(t, topic, 40*time.Second, func(recs []*kgo.Record) bool {
			got = latest(recs)
			return maps.Equal(got, want)
		})
		checkTombstones(t, topic, recs)
		if len(want) == 0 {
			t.Errorf("%s: the model has no rows: the test exercises nothing", topic)
		}
	}
	adm := kafkatest.Admin(t)
	details, err := adm.ListTopics(t.Context(), app+"-priced-subscription-repartition", app+"-priced-response-repartition")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{app + "-priced-subscription-repartition": 3, app + "-priced-response-repartition": 2} {
		if got := len(details[topic].Partitions); got != want {
			t.Errorf("%s has %d partitions, want %d (the table it is co-partitioned with)", topic, got, want)
		}
	}
}
