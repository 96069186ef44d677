package tidemarktest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// kv is a local pair type: unkeyed literals keep the tables short.
type kv struct{ Key, Value string }

func readKV(t *testing.T, o *tidemarktest.OutputTopic[string, string]) []kv {
	t.Helper()
	var out []kv
	for _, r := range readAll(t, o) {
		out = append(out, kv{r.Key, r.Value})
	}
	return out
}

func TestStatelessOperators(t *testing.T) {
	cases := []struct {
		name  string
		build func(s topology.Stream[string, string]) topology.Stream[string, string]
		in    []kv
		want  []kv
	}{
		{"filter keeps matching records", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.Filter(func(_, v string) bool { return v != "skip" })
		}, []kv{{"a", "1"}, {"b", "skip"}, {"c", "3"}}, []kv{{"a", "1"}, {"c", "3"}}},
		{"filterNot drops matching records", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.FilterNot(func(_, v string) bool { return v == "skip" })
		}, []kv{{"a", "1"}, {"b", "skip"}}, []kv{{"a", "1"}}},
		{"map replaces key and value", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.Map(func(k, v string) (string, string) { return v, k })
		}, []kv{{"a", "1"}}, []kv{{"1", "a"}}},
		{"mapValues keeps the key", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.MapValues(func(k, v string) string { return k + v })
		}, []kv{{"a", "1"}}, []kv{{"a", "a1"}}},
		{"flatMap emits zero or more records", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.FlatMap(func(k, v string) []topology.KeyValue[string, string] {
				var out []topology.KeyValue[string, string]
				for _, c := range v {
					out = append(out, topology.KeyValue[string, string]{Key: string(c), Value: k})
				}
				return out
			})
		}, []kv{{"a", "xy"}, {"b", ""}}, []kv{{"x", "a"}, {"y", "a"}}},
		{"flatMapValues splits values", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.FlatMapValues(func(_, v string) []string { return strings.Split(v, ",") })
		}, []kv{{"a", "1,2"}}, []kv{{"a", "1"}, {"a", "2"}}},
		{"selectKey re-keys", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.SelectKey(func(_, v string) string { return "k" + v })
		}, []kv{{"a", "1"}}, []kv{{"k1", "1"}}},
		{"merge interleaves in processing order", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			return s.Filter(func(k, _ string) bool { return k == "a" }).Merge(s.Filter(func(k, _ string) bool { return k == "b" }))
		}, []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"a", "4"}}, []kv{{"a", "1"}, {"b", "2"}, {"a", "4"}}},
		{"split sends each record to the first matching branch", func(s topology.Stream[string, string]) topology.Stream[string, string] {
			sp := s.Split()
			big := sp.Branch(func(_, v string) bool { return len(v) > 2 }).MapValues(func(_, v string) string { return "big:" + v })
			small := sp.Branch(func(_, v string) bool { return len(v) > 0 }).MapValues(func(_, v string) string { return "small:" + v })
			rest := sp.Default().MapValues(func(_, _ string) string { return "empty" })
			return big.Merge(small).Merge(rest)
		}, []kv{{"a", "long"}, {"b", "s"}, {"c", ""}}, []kv{{"a", "big:long"}, {"b", "small:s"}, {"c", "empty"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			c.build(b.Stream("in", serde.String(), serde.String())).WithSerdes(serde.String(), serde.String()).To("out")
			d := newDriver(t, b)
			in := tidemarktest.Input(d, "in", serde.String(), serde.String())
			for i, r := range c.in {
				must(t, in.Pipe(r.Key, r.Value, int64(i)))
			}
			got := readKV(t, tidemarktest.Output(d, "out", serde.String(), serde.String()))
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestTombstonesPassThroughStatelessOperatorsAndAreSkippedByAggregations(t *testing.T) {
	b := topology.NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.String())
	s.MapValues(func(_, v string) string { return strings.ToUpper(v) }).To("upper")
	s.GroupByKey().Count(topology.Named("n")).ToStream().To("counts")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	must(t, in.Pipe("a", "x", 1))
	must(t, in.PipeTombstone("a", 2))
	got := readAll(t, tidemarktest.Output(d, "upper", serde.String(), serde.String()))
	if len(got) != 2 || got[0].Value != "X" || !got[1].Tombstone {
		t.Errorf("upper = %+v, want X then a tombstone", got)
	}
	if n := len(readAll(t, tidemarktest.Output(d, "counts", serde.String(), serde.Int64()))); n != 1 {
		t.Errorf("count emitted %d updates, want 1: the tombstone is skipped", n)
	}
	if m := d.Metrics(); m.Dropped[topology.DropSkipped] != 1 || m.DroppedByNode["n"] != 1 {
		t.Errorf("metrics %+v, want one skipped record counted against n", m)
	}
}

func TestTimestampExtractorAndInvalidTimestamps(t *testing.T) {
	type order struct {
		ID     string
		Placed int64
	}
	b := topology.NewBuilder("app")
	b.Stream("orders", serde.String(), serde.JSON[order](),
		topology.WithTimestampExtractor(func(r topology.Record[string, order], _ int64) int64 { return r.Value.Placed })).
		To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "orders", serde.String(), serde.JSON[order]())
	must(t, in.Pipe("o1", order{"o1", 5000}, 1))
	must(t, in.Pipe("o2", order{"o2", -1}, 2))
	got := readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.JSON[order]()))
	if len(got) != 1 || got[0].Timestamp != 5000 {
		t.Errorf("out = %+v, want o1 at event time 5000 only", got)
	}
	if n := d.Metrics().Dropped[topology.DropInvalidTimestamp]; n != 1 {
		t.Errorf("invalid timestamps dropped = %d, want 1", n)
	}
}

func TestPartitionerChoosesSinkPartition(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.Int64()).To("out", topology.WithPartitioner(func(_ string, _ string, v int64, n int32) int32 { return int32(v) % n }))
	d := newDriver(t, b, tidemarktest.WithPartitions("out", 3))
	in := tidemarktest.Input(d, "in", serde.String(), serde.Int64())
	for _, v := range []int64{0, 1, 2, 4} {
		must(t, in.Pipe("k", v, 1))
	}
	var parts []int32
	for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.Int64())) {
		parts = append(parts, r.Partition)
	}
	if !slices.Equal(parts, []int32{0, 1, 2, 1}) {
		t.Errorf("partitions %v, want [0 1 2 1]", parts)
	}
}

// dedup is a Processor API operator: it forwards a key's first value, keeps
// seen keys in a store, and on a stream-time punctuation reports how many it
// saw; a wall-clock punctuation emits a heartbeat.
type dedup struct {
	ctx   topology.ProcessorContext[string, string]
	seen  *store.TypedKeyValue[string, string]
	log   *[]string
	store string
}

func (p *dedup) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	s, err := ctx.Store(p.store)
	if err != nil {
		return err
	}
	p.seen = store.NewTypedKeyValue(s.(store.KeyValue), serde.String(), serde.String())
	if _, err := ctx.Schedule(10*time.Second, topology.StreamTime, func(ts int64) error {
		n := 0
		if err := p.seen.All(func(string, string) bool { n++; return true }); err != nil {
			return err
		}
		*p.log = append(*p.log, fmt.Sprintf("stream-time %d: %d keys", ts, n))
		return nil
	}); err != nil {
		return err
	}
	_, err = ctx.Schedule(time.Minute, topology.WallClockTime, func(ts int64) error {
		return ctx.Forward(topology.Record[string, string]{Key: "heartbeat", Value: fmt.Sprint(ts), Timestamp: ts})
	})
	return err
}

func (p *dedup) Process(r topology.Record[string, string]) error {
	if _, found, err := p.seen.Get(r.Key); err != nil || found {
		return err
	}
	meta, ok := p.ctx.RecordMeta()
	if !ok || meta.Topic != "in" {
		return fmt.Errorf("record meta %+v %v during processing", meta, ok)
	}
	if err := p.seen.Put(r.Key, r.Value); err != nil {
		return err
	}
	return p.ctx.Forward(r)
}

func (p *dedup) Close() error { *p.log = append(*p.log, "closed"); return nil }

func TestProcessorAPIStoresAndPunctuation(t *testing.T) {
	var log []string
	b := topology.NewBuilder("app")
	b.AddStore(store.Spec{Name: "seen", Kind: store.KindKeyValue, Logged: true})
	b.Stream("in", serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] { return &dedup{log: &log, store: "seen"} },
			topology.Named("dedup"), topology.WithStores("seen")).
		To("out")
	topo, err := b.Build()
	must(t, err)
	if info, ok := topo.Store("seen"); !ok || info.Changelog != "app-seen-changelog" || !slices.Equal(info.Nodes, []string{"dedup"}) {
		t.Errorf("store info %+v, want changelog app-seen-changelog connected to dedup", info)
	}
	d, err := tidemarktest.New(topo)
	must(t, err)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())

	must(t, in.Pipe("a", "1", 1000))
	must(t, in.Pipe("a", "2", 5000))
	must(t, in.Pipe("b", "3", 9999))
	must(t, in.Pipe("c", "4", 10000))
	tr := "first record fires the stream-time punctuator (grid from 0), then each 10s boundary once"
	if want := []string{"stream-time 1000: 1 keys", "stream-time 10000: 3 keys"}; !slices.Equal(log, want) {
		t.Errorf("%s: log = %v, want %v", tr, log, want)
	}
	must(t, in.Pipe("d", "5", 45000))
	if want := "stream-time 45000: 4 keys"; log[len(log)-1] != want || len(log) != 3 {
		t.Errorf("a jump over several intervals fires once: log = %v", log)
	}
	if got := readKV(t, out); !slices.Equal(got, []kv{{"a", "1"}, {"b", "3"}, {"c", "4"}, {"d", "5"}}) {
		t.Errorf("out = %v, want each key's first value", got)
	}

	must(t, d.AdvanceWallClock(59*time.Second))
	if out.Len() != 0 {
		t.Errorf("wall-clock punctuator fired before its interval")
	}
	must(t, d.AdvanceWallClock(time.Second))
	if got := readKV(t, out); !slices.Equal(got, []kv{{"heartbeat", "60000"}}) {
		t.Errorf("after 60s of wall clock: out = %v, want one heartbeat", got)
	}
	must(t, d.Close())
	if log[len(log)-1] != "closed" {
		t.Errorf("Close did not close the processor: %v", log)
	}
}

func TestWatermarkIsMinOverInputsMinusLateness(t *testing.T) {
	b := topology.NewBuilder("app", topology.WithAllowedLateness(2*time.Second))
	orders := b.Stream("orders", serde.String(), serde.String())
	payments := b.Stream("payments", serde.String(), serde.String())
	orders.Join(payments, func(_, o, p string) string { return o + p }, topology.JoinWindowsOf(time.Minute, 0)).To("out")
	d := newDriver(t, b)
	tk := d.Tasks()[0]
	if wm := tk.Watermark(); wm >= 0 {
		t.Errorf("watermark before any record = %d, want below zero", wm)
	}
	must(t, tidemarktest.Input(d, "orders", serde.String(), serde.String()).Pipe("k", "o", 10000))
	must(t, tidemarktest.Input(d, "payments", serde.String(), serde.String()).Pipe("k", "p", 4000))
	if tk.StreamTime() != 10000 {
		t.Errorf("stream time = %d, want 10000", tk.StreamTime())
	}
	if wm := tk.Watermark(); wm != 2000 {
		t.Errorf("watermark = %d, want min(10000, 4000) - 2000 = 2000", wm)
	}
}

func TestHeadersFlowToSinksAndForeachSeesEveryRecord(t *testing.T) {
	var seen []string
	b := topology.NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.String())
	s.Foreach(func(k, v string) { seen = append(seen, k+v) })
	s.Peek(func(string, string) {}).To("out")
	d := newDriver(t, b)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	must(t, in.PipeRecord(topology.Record[string, string]{Key: "k", Value: "v", Timestamp: 7,
		Headers: []topology.Header{{Key: "trace-id", Value: []byte("abc")}}}))
	got := readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String()))
	if len(got) != 1 || len(got[0].Headers) != 1 || got[0].Headers[0].Key != "trace-id" || string(got[0].Headers[0].Value) != "abc" {
		t.Errorf("out = %+v, want the input's trace-id header", got)
	}
	if !slices.Equal(seen, []string{"kv"}) {
		t.Errorf("foreach saw %v", seen)
	}
}
