package tidemarktest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

func TestTableFilterTurnsValuesThatStopMatchingIntoDeletes(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Table("stock", serde.String(), serde.Int64(), topology.Named("stock")).
		Filter(func(_ string, n int64) bool { return n > 0 }).
		MapValues(func(_ string, n int64) string { return strings.Repeat("#", int(n)) }).
		WithSerdes(nil, serde.String()).
		ToStream().To("in-stock")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "stock", serde.String(), serde.Int64())
	must(t, in.Pipe("mug", 2, 1))
	must(t, in.Pipe("lamp", 0, 2))
	must(t, in.Pipe("mug", 0, 3))
	must(t, in.Pipe("mug", 1, 4))
	var got []string
	for _, r := range readAll(t, tidemarktest.Output(d, "in-stock", serde.String(), serde.String())) {
		v := r.Value
		if r.Tombstone {
			v = "<delete>"
		}
		got = append(got, r.Key+"="+v)
	}
	// lamp never matched: nothing to delete downstream.
	if want := []string{"mug=##", "mug=<delete>", "mug=#"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestStreamToTableKeepsLatestValueAndDeletesOnTombstone(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("carts", serde.String(), serde.String()).ToTable(topology.Named("latest-cart"))
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "carts", serde.String(), serde.String())
	must(t, in.Pipe("c1", "mug", 10))
	must(t, in.Pipe("c2", "lamp", 11))
	must(t, in.Pipe("c1", "desk", 12))
	must(t, in.PipeTombstone("c2", 13))
	rows, err := tidemarktest.ReadStore(d, "latest-cart", serde.String(), serde.String())
	must(t, err)
	if len(rows) != 1 || rows[0].Key != "c1" || rows[0].Value != "desk" || rows[0].Timestamp != 12 {
		t.Errorf("store rows %+v, want only c1=desk@12", rows)
	}
	v, found, err := tidemarktest.Get(d, "latest-cart", "c1", serde.String(), serde.String())
	if err != nil || !found || v != "desk" {
		t.Errorf("Get(c1) = %q, %v, %v", v, found, err)
	}
}

func TestReduceCombinesValuesPerKey(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("bids", serde.String(), serde.Int64()).GroupByKey().
		Reduce(func(agg, v int64) int64 { return max(agg, v) }, topology.Named("best-bid")).
		ToStream().To("best")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "bids", serde.String(), serde.Int64())
	for _, v := range []int64{5, 3, 9, 1} {
		must(t, in.Pipe("lot-1", v, v))
	}
	var got []int64
	for _, r := range readAll(t, tidemarktest.Output(d, "best", serde.String(), serde.Int64())) {
		got = append(got, r.Value)
	}
	if !slices.Equal(got, []int64{5, 5, 9, 9}) {
		t.Errorf("best bids %v, want [5 5 9 9]", got)
	}
}

var errBoom = errors.New("boom")

type failing struct{}

func (failing) Init(topology.ProcessorContext[string, string]) error { return nil }
func (failing) Process(r topology.Record[string, string]) error {
	if r.Value == "bad" {
		return errBoom
	}
	return nil
}
func (failing) Close() error { return nil }

func TestProcessingErrorsNameOperatorAndRecord(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] { return failing{} }, topology.Named("validate"))
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	must(t, in.Pipe("k", "ok", 1))
	err := in.Pipe("k", "bad", 2)
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v, want it to wrap the processor's error", err)
	}
	for _, part := range []string{"task 0_0", `source "in-SOURCE"`, "in/0@1", `operator "validate"`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not mention %s", err, part)
		}
	}
}

func TestUndecodableRecords(t *testing.T) {
	for _, skip := range []bool{false, true} {
		b := topology.NewBuilder("app")
		var opts []topology.SourceOption
		if skip {
			opts = append(opts, topology.SkipUndecodable())
		}
		b.Stream("in", serde.String(), serde.Int64(), opts...).To("out")
		d := newDriver(t, b)
		bad := tidemarktest.Input(d, "in", serde.String(), serde.String()) // 3 bytes: not an int64
		err := bad.Pipe("k", "bad", 1)
		switch {
		case !skip && !errors.Is(err, serde.ErrDecode):
			t.Errorf("without SkipUndecodable: err = %v, want the task to fail with serde.ErrDecode", err)
		case skip && err != nil:
			t.Errorf("with SkipUndecodable: err = %v, want the record dropped", err)
		case skip && d.Metrics().Dropped[topology.DropUndecodable] != 1:
			t.Errorf("with SkipUndecodable: drops %v, want one undecodable", d.Metrics().Dropped)
		}
	}
}

// Stock per (warehouse, SKU) rolls up to stock per SKU; changing or moving a
// row subtracts its old quantity before adding the new one.
func TestGroupedTableAddsAndSubtracts(t *testing.T) {
	b := topology.NewBuilder("app")
	// Rows are keyed "<warehouse>/<sku>".
	b.Table("stock", serde.String(), serde.Int64(), topology.Named("stock")).
		GroupBy(func(k string, q int64) (string, int64) { return k[strings.Index(k, "/")+1:], q }, serde.String(), serde.Int64(), topology.Named("stock-by-sku")).
		Aggregate(func() int64 { return 0 },
			func(_ string, q, sum int64) int64 { return sum + q },
			func(_ string, q, sum int64) int64 { return sum - q },
			serde.Int64(), topology.Named("sku-stock")).
		ToStream().To("sku-stock")
	d := newDriver(t, b, tidemarktest.WithDefaultPartitions(2))
	in := tidemarktest.Input(d, "stock", serde.String(), serde.Int64())
	must(t, in.Pipe("berlin/mug", 5, 1))
	must(t, in.Pipe("paris/mug", 3, 2))
	must(t, in.Pipe("berlin/mug", 2, 3))
	must(t, in.PipeTombstone("paris/mug", 4))
	var got []int64
	for _, r := range readAll(t, tidemarktest.Output(d, "sku-stock", serde.String(), serde.Int64())) {
		got = append(got, r.Value)
	}
	// 5; 8; berlin 5->2, a row that stays in its group: one update, 5 (no
	// intermediate 3, as in Kafka Streams since KIP-904); paris removed: 2.
	if want := []int64{5, 8, 5, 2}; !slices.Equal(got, want) {
		t.Errorf("mug stock updates %v, want %v", got, want)
	}
}

// Users re-grouped by region: a user who moves region leaves the old
// group's count before joining the new one's (two updates, old group
// first); a user updated within a region changes that region's count in
// one update, never through an intermediate count one lower.
func TestGroupedTableMovesAndStays(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Table("users", serde.String(), serde.String(), topology.Named("users")).
		GroupBy(func(user, region string) (string, string) { return region, user }, serde.String(), serde.String(), topology.Named("by-region")).
		Count(topology.Named("per-region")).
		ToStream().To("per-region")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "users", serde.String(), serde.String())
	must(t, in.Pipe("u1", "eu", 1))
	must(t, in.Pipe("u2", "eu", 2))
	must(t, in.Pipe("u1", "us", 3)) // moves
	must(t, in.Pipe("u1", "us", 4)) // stays
	must(t, in.PipeTombstone("u2", 5))
	var got []string
	for _, r := range readAll(t, tidemarktest.Output(d, "per-region", serde.String(), serde.Int64())) {
		got = append(got, fmt.Sprintf("%s=%d@%d", r.Key, r.Value, r.Timestamp))
	}
	want := []string{"eu=1@1", "eu=2@2", "eu=1@3", "us=1@3", "us=1@4", "eu=0@5"}
	if !slices.Equal(got, want) {
		t.Errorf("region counts %v, want %v", got, want)
	}
}

// A stream re-keyed before ToTable is repartitioned by its new key, as
// Kafka Streams does: the row lands in the task of its key's partition,
// where a stream-table join (and a query) looks for it. Without the
// repartition it stayed in the partition of its old key, and a join on
// the new key found nothing.
func TestToTableAfterKeyChangeRepartitions(t *testing.T) {
	// A user key in partition 0 whose value, the new key, is in partition 1.
	var user, sku string
	for i := 0; user == "" || sku == ""; i++ {
		k := fmt.Sprintf("key-%d", i)
		switch p := task.DefaultPartition([]byte(k), 2); {
		case p == 0 && user == "":
			user = k
		case p == 1 && sku == "":
			sku = k
		}
	}
	build := func() *topology.Builder {
		b := topology.NewBuilder("app")
		tbl := b.Stream("in", serde.String(), serde.String()).
			SelectKey(func(_, v string) string { return v }).
			ToTable(topology.Named("by-sku"))
		b.Stream("lookups", serde.String(), serde.String()).
			JoinTable(tbl, func(_, l, r string) string { return l + "+" + r }).To("out")
		return b
	}
	topo, err := build().Build()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(topo.RepartitionTopics(), func(it topology.InternalTopic) bool { return it.Name == "app-by-sku-repartition" }) {
		t.Errorf("repartition topics %v: want app-by-sku-repartition", topo.RepartitionTopics())
	}
	d := newDriver(t, build(), tidemarktest.WithDefaultPartitions(2))
	must(t, tidemarktest.Input(d, "in", serde.String(), serde.String()).Pipe(user, sku, 1))
	rows, err := tidemarktest.ReadStore(d, "by-sku", serde.String(), serde.String())
	must(t, err)
	if len(rows) != 1 || rows[0].Key != sku || rows[0].Partition != 1 {
		t.Errorf("rows %+v: want %s in partition 1, its key's", rows, sku)
	}
	must(t, tidemarktest.Input(d, "lookups", serde.String(), serde.String()).Pipe(sku, "L", 2))
	if out := readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String())); len(out) != 1 || out[0].Value != "L+"+sku {
		t.Errorf("join on %s: %+v, want one L+%s", sku, out, sku)
	}
}
