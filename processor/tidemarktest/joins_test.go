package tidemarktest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

type joinCase struct {
	name  string
	build func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string]
}

func opt(v string, ok bool) string {
	if !ok {
		return "null"
	}
	return v
}

// streamJoin builds orders ⋈ payments within 10s (grace 5s) -> joined.
func streamJoin(t *testing.T, build func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string]) (*transcript, *tidemarktest.InputTopic[string, string], *tidemarktest.InputTopic[string, string]) {
	b := topology.NewBuilder("app")
	l := b.Stream("orders", serde.String(), serde.String())
	r := b.Stream("payments", serde.String(), serde.String())
	build(l, r, topology.JoinWindowsOf(10*time.Second, 5*time.Second)).To("joined")
	tr := goldenRun(t, b, "joined", serde.String(), serde.String())
	return tr, tidemarktest.Input(tr.d, "orders", serde.String(), serde.String()), tidemarktest.Input(tr.d, "payments", serde.String(), serde.String())
}

func TestGoldenStreamStreamJoin(t *testing.T) {
	cases := []joinCase{
		{"inner", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.Join(r, func(_ string, o, p string) string { return o + "+" + p }, w, topology.Named("order-payment"))
		}},
		{"left", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.LeftJoin(r, func(_ string, o, p string, ok bool) string { return o + "+" + opt(p, ok) }, w, topology.Named("order-payment"))
		}},
		{"outer", func(l, r topology.Stream[string, string], w topology.JoinWindows) topology.Stream[string, string] {
			return l.OuterJoin(r, func(_ string, o string, lok bool, p string, rok bool) string { return opt(o, lok) + "+" + opt(p, rok) }, w, topology.Named("order-payment"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, orders, payments := streamJoin(t, c.build)
			tr.note("window 10s, grace 5s; a joined record's timestamp is the later of the two inputs")
			pipe(tr, orders, "orders", "o1", "order1", 1000)
			pipe(tr, payments, "payments", "o1", "pay1", 4000)
			pipe(tr, payments, "payments", "o1", "pay1-retry", 11000)
			tr.note("12000 is more than 10s after order1 at 1000: no join")
			pipe(tr, payments, "payments", "o1", "pay1-late", 12000)
			pipe(tr, orders, "orders", "o2", "order2", 13000)
			pipe(tr, payments, "payments", "o3", "pay3", 14000)
			tr.note("left/outer: unjoined records are emitted only once stream time passes their window end + grace (ts+10s+5s)")
			pipe(tr, orders, "orders", "o4", "order4", 27000)
			pipe(tr, orders, "orders", "o4", "order4b", 29001)
			tr.note("out of order but within grace, and its window end (28000) already passed: left/outer emit it unjoined at once, like Kafka Streams")
			pipe(tr, orders, "orders", "o5", "order5", 18000)
			tr.note("no lateness check, as in Kafka Streams: past window + grace, a record still joins what the stores retain (before + after + grace = 25s behind stream time), here order2; left/outer already emitted order2 unjoined")
			pipe(tr, payments, "payments", "o2", "pay2-late", 13500)
			tr.note("older than anything retained: it joins nothing, and an outer join emits it unjoined at once")
			pipe(tr, payments, "payments", "o4", "pay4-too-late", 2000)
			tr.check()
		})
	}
}

func TestGoldenStreamTableJoin(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			b := topology.NewBuilder("app")
			prices := b.Table("prices", serde.String(), serde.Int64(), topology.Named("prices"))
			adds := b.Stream("cart-adds", serde.String(), serde.Int64())
			var out topology.Stream[string, string]
			if left {
				out = adds.LeftJoinTable(prices, func(_ string, qty, price int64, ok bool) string {
					if !ok {
						return fmt.Sprintf("%d x unknown", qty)
					}
					return fmt.Sprintf("%d x %d", qty, price)
				})
			} else {
				out = adds.JoinTable(prices, func(_ string, qty, price int64) string { return fmt.Sprintf("%d x %d", qty, price) })
			}
			out.WithSerdes(nil, serde.String()).To("priced")
			tr := goldenRun(t, b, "priced", serde.String(), serde.String())
			pin := tidemarktest.Input(tr.d, "prices", serde.String(), serde.Int64())
			ain := tidemarktest.Input(tr.d, "cart-adds", serde.String(), serde.Int64())
			tr.note("output timestamp is the stream record's; table updates produce no output")
			pipe(tr, ain, "cart-adds", "sku-1", 2, 1000)
			pipe(tr, pin, "prices", "sku-1", 999, 5000)
			pipe(tr, ain, "cart-adds", "sku-1", 3, 2000)
			pipe(tr, pin, "prices", "sku-1", 1099, 6000)
			pipe(tr, ain, "cart-adds", "sku-1", 1, 7000)
			must(t, pin.PipeTombstone("sku-1", 8000))
			tr.note("after a tombstone deleted sku-1 from the table")
			pipe(tr, ain, "cart-adds", "sku-1", 4, 9000)
			tr.check()
		})
	}
}

func TestGoldenTableTableJoin(t *testing.T) {
	cases := []struct {
		name string
		join func(l topology.Table[string, string], r topology.Table[string, int64]) topology.Table[string, string]
	}{
		{"inner", func(l topology.Table[string, string], r topology.Table[string, int64]) topology.Table[string, string] {
			return l.Join(r, func(_ string, name string, stock int64) string { return fmt.Sprintf("%s:%d", name, stock) })
		}},
		{"left", func(l topology.Table[string, string], r topology.Table[string, int64]) topology.Table[string, string] {
			return l.LeftJoin(r, func(_ string, name string, stock int64, ok bool) string {
				return fmt.Sprintf("%s:%s", name, opt(fmt.Sprint(stock), ok))
			})
		}},
		{"outer", func(l topology.Table[string, string], r topology.Table[string, int64]) topology.Table[string, string] {
			return l.OuterJoin(r, func(_ string, name string, lok bool, stock int64, rok bool) string {
				return fmt.Sprintf("%s:%s", opt(name, lok), opt(fmt.Sprint(stock), rok))
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			products := b.Table("products", serde.String(), serde.String(), topology.Named("products"))
			stock := b.Table("stock", serde.String(), serde.Int64(), topology.Named("stock"))
			c.join(products, stock).ToStream().To("catalog")
			tr := goldenRun(t, b, "catalog", serde.String(), serde.String())
			pin := tidemarktest.Input(tr.d, "products", serde.String(), serde.String())
			sin := tidemarktest.Input(tr.d, "stock", serde.String(), serde.Int64())
			tr.note("either side's change updates the row; its timestamp is the later of the two rows")
			pipe(tr, pin, "products", "sku-1", "mug", 1000)
			pipe(tr, sin, "stock", "sku-1", 5, 3000)
			pipe(tr, pin, "products", "sku-1", "big mug", 2000)
			pipe(tr, sin, "stock", "sku-2", 7, 4000)
			tr.note("tombstone for stock of sku-1")
			must(t, sin.PipeTombstone("sku-1", 5000))
			tr.flush()
			tr.check()
		})
	}
}
