package tidemarktest_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// BenchmarkStatefulOperatorsOnBadger runs the other stateful operators the
// way BenchmarkTimeQueuesOnBadger runs the time queues: on the service's
// Badger stores, a commit every 500 records, stream time advancing 10 ms a
// record so windows, join windows and versions expire as it runs. The cost
// per record after 20,000 or 60,000 records should be what it is on a
// fresh store.
func BenchmarkStatefulOperatorsOnBadger(b *testing.B) {
	str := serde.String()
	i64 := serde.Int64()
	toOut := func(t topology.Table[topology.Windowed[string], int64]) {
		t.ToStream().Map(func(k topology.Windowed[string], v int64) (string, string) {
			return k.Key, strconv.FormatInt(v, 10)
		}).WithSerdes(str, str).To("out")
	}
	// alternating pipes records to "l" and "r" in turn, over n keys.
	alternating := func(n int) func(d *tidemarktest.Driver) func(int) error {
		return func(d *tidemarktest.Driver) func(int) error {
			l := tidemarktest.Input(d, "l", str, str)
			r := tidemarktest.Input(d, "r", str, str)
			return func(i int) error {
				if i%2 == 0 {
					return l.Pipe(strconv.Itoa(i%n), "v", int64(i)*10)
				}
				return r.Pipe(strconv.Itoa(i%n), "v", int64(i)*10)
			}
		}
	}
	keyed := func(n int) func(d *tidemarktest.Driver) func(int) error {
		return func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			return func(i int) error { return in.Pipe(strconv.Itoa(i%n), "v", int64(i)*10) }
		}
	}
	cases := []benchCase{
		{"tumbling", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.WindowedBy(g, topology.TumblingWindows(time.Second, 0)).Count(topology.Named("w")))
		}, keyed(500)},
		{"tumbling-final", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.WindowedBy(g, topology.TumblingWindows(time.Second, 0)).Count(topology.Named("w"), topology.EmitFinal()))
		}, keyed(500)},
		{"hopping", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.WindowedBy(g, topology.HoppingWindows(time.Second, 250*time.Millisecond, 0)).Count(topology.Named("w")))
		}, keyed(500)},
		{"hopping-final", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.WindowedBy(g, topology.HoppingWindows(time.Second, 250*time.Millisecond, 0)).Count(topology.Named("w"), topology.EmitFinal()))
		}, keyed(500)},
		{"sliding", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(time.Second, 0)).Count(topology.Named("w")))
		}, keyed(500)},
		{"sliding-final", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			toOut(topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(time.Second, 0)).Count(topology.Named("w"), topology.EmitFinal()))
		}, keyed(500)},
		{"session", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(time.Second, 0)).
				Count(topology.Named("s")).ToStream().Map(func(k topology.Windowed[string], v int64) (string, string) {
				return k.Key, strconv.FormatInt(v, 10)
			}).WithSerdes(str, str).To("out")
		}, keyed(500)},
		{"inner-join", func(tb *topology.Builder) {
			l := tb.Stream("l", str, str)
			r := tb.Stream("r", str, str)
			l.Join(r, func(_ string, lv, rv string) string { return lv + rv },
				topology.JoinWindowsOf(time.Second, 0), topology.Named("j")).To("out")
		}, alternating(500)},
		{"left-join", func(tb *topology.Builder) {
			l := tb.Stream("l", str, str)
			r := tb.Stream("r", str, str)
			l.LeftJoin(r, func(_ string, lv, rv string, _ bool) string { return lv + rv },
				topology.JoinWindowsOf(time.Second, 0), topology.Named("j")).To("out")
		}, alternating(500)},
		{"stream-table", func(tb *topology.Builder) {
			t := tb.Table("t", str, str, topology.Named("t"))
			tb.Stream("s", str, str).LeftJoinTable(t, func(_ string, v, tv string, _ bool) string { return v + tv }).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			s := tidemarktest.Input(d, "s", str, str)
			t := tidemarktest.Input(d, "t", str, str)
			return func(i int) error {
				if i%2 == 0 {
					return t.Pipe(strconv.Itoa(i%500), strconv.Itoa(i), int64(i)*10)
				}
				return s.Pipe(strconv.Itoa(i%500), "v", int64(i)*10)
			}
		}},
		{"versioned-table", func(tb *topology.Builder) {
			t := tb.Table("t", str, str, topology.Named("t"), topology.Versioned(time.Second))
			tb.Stream("s", str, str).LeftJoinTable(t, func(_ string, v, tv string, _ bool) string { return v + tv }).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			s := tidemarktest.Input(d, "s", str, str)
			t := tidemarktest.Input(d, "t", str, str)
			return func(i int) error {
				if i%2 == 0 {
					return t.Pipe(strconv.Itoa(i%50), strconv.Itoa(i), int64(i)*10)
				}
				return s.Pipe(strconv.Itoa(i%50), "v", int64(i)*10)
			}
		}},
		{"fk-join", func(tb *topology.Builder) {
			l := tb.Table("l", str, str, topology.Named("l"))
			r := tb.Table("r", str, str, topology.Named("r"))
			l.JoinOnForeignKey(r, func(_ string, v string) (string, bool) { return v, true },
				func(_ string, v, o string) string { return v + o }, topology.Named("fk")).ToStream().To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			l := tidemarktest.Input(d, "l", str, str)
			r := tidemarktest.Input(d, "r", str, str)
			return func(i int) error {
				if i%4 == 0 {
					return r.Pipe(strconv.Itoa(i%100), "o", int64(i)*10)
				}
				// Each left key moves to another foreign key.
				return l.Pipe(strconv.Itoa(i%500), strconv.Itoa(i%100), int64(i)*10)
			}
		}},
		{"cogroup", func(tb *topology.Builder) {
			a := tb.Stream("a", str, str).GroupByKey()
			c := tb.Stream("c", str, str).GroupByKey()
			topology.CogroupedStream[string, int64](a.Cogroup(func(_ string, _ string, agg int64) int64 { return agg + 1 })).
				Cogroup(c, func(_ string, _ string, agg int64) int64 { return agg + 2 }).
				Aggregate(func() int64 { return 0 }, i64, topology.Named("cg")).
				ToStream().MapValues(func(_ string, v int64) string { return strconv.FormatInt(v, 10) }).WithSerdes(str, str).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			a := tidemarktest.Input(d, "a", str, str)
			c := tidemarktest.Input(d, "c", str, str)
			return func(i int) error {
				if i%2 == 0 {
					return a.Pipe(strconv.Itoa(i%500), "v", int64(i)*10)
				}
				return c.Pipe(strconv.Itoa(i%500), "v", int64(i)*10)
			}
		}},
		{"table-groupby", func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t")).
				GroupBy(func(k, v string) (string, string) { return v, k }, str, str).
				Count(topology.Named("c")).
				ToStream().MapValues(func(_ string, v int64) string { return strconv.FormatInt(v, 10) }).WithSerdes(str, str).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			// Each key changes group every record.
			return func(i int) error { return in.Pipe(strconv.Itoa(i%500), strconv.Itoa(i%37), int64(i)*10) }
		}},
		{"record-cache", func(tb *topology.Builder) {
			tb.Stream("in", str, str).GroupByKey().Count(topology.Named("c"), topology.WithRecordCache(100)).
				ToStream().MapValues(func(_ string, v int64) string { return strconv.FormatInt(v, 10) }).WithSerdes(str, str).To("out")
		}, keyed(5000)},
		{"global", func(tb *topology.Builder) {
			g := tb.GlobalTable("g", str, str, topology.Named("g"))
			tb.Stream("s", str, str).LeftJoinGlobal(g, func(k, _ string) string { return k },
				func(_ string, v, gv string, _ bool) string { return v + gv }).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			s := tidemarktest.Input(d, "s", str, str)
			g := tidemarktest.Input(d, "g", str, str)
			return func(i int) error {
				if i%2 == 0 {
					return g.Pipe(strconv.Itoa(i%500), strconv.Itoa(i), int64(i)*10)
				}
				return s.Pipe(strconv.Itoa(i%500), "v", int64(i)*10)
			}
		}},
	}
	runOnBadger(b, cases)
}
