package tidemarktest_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// The tables below pin down null keys, empty keys and tombstones operator
// by operator against hand-written expectations (the semantics are Kafka
// Streams 4.x's, see the topology package documentation). Inputs and outputs are
// string-keyed, so a null key and the empty key "" are both the zero
// string: only Record.NullKey tells them apart, and a table's output shows
// a null key as <null> and every other key quoted.

const (
	null = "\x00null" // as an input key: a null Kafka key
	tomb = "\x00tomb" // as an input value: a null Kafka value
)

type nkInput struct {
	topic, key, value string
	ts                int64
	partition         int32 // -1: the default partitioner's choice
}

func rec(topic, key, value string, ts int64) nkInput { return nkInput{topic, key, value, ts, -1} }

func (in nkInput) to(p int32) nkInput { in.partition = p; return in }

// ptrString is a serde for *string keys: Go's way of writing a key
// function that can return null (nil). Encoding nil panics: a null key
// must never reach a serde.
func ptrString() serde.Serde[*string] {
	return serde.Func[*string]{
		EncodeFunc: func(dst []byte, v *string) ([]byte, error) { return append(dst, *v...), nil },
		DecodeFunc: func(b []byte) (*string, error) { s := string(b); return &s, nil },
	}
}

// nilIfEmpty is a key function returning a null key for an empty value.
func nilIfEmpty(_ string, v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func keyOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// countsTo writes a count table to "out" with string values.
func countsTo[K any](t topology.Table[K, int64], ks serde.Serde[K]) {
	t.ToStream().MapValues(func(_ K, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(ks, serde.String()).To("out")
}

// windowsTo writes a windowed count to "out", keyed "<key>@<start>".
func windowsTo(t topology.Table[topology.Windowed[string], int64]) {
	t.ToStream().Map(func(w topology.Windowed[string], n int64) (string, string) {
		return fmt.Sprintf("%s@%d", w.Key, w.Start), strconv.FormatInt(n, 10)
	}).WithSerdes(serde.String(), serde.String()).To("out")
}

func opt2(v string, ok bool) string {
	if !ok {
		return "none"
	}
	return v
}

type nullKeyCase struct {
	name  string
	build func(b *topology.Builder)
	in    []nkInput
	want  []string         // records on "out": key=value
	drops map[string]int64 // dropped records by "operator/reason"
}

func runNullKeyCase(t *testing.T, c nullKeyCase, opts ...tidemarktest.Option) *tidemarktest.Driver {
	t.Helper()
	b := topology.NewBuilder("app")
	c.build(b)
	d := newDriver(t, b, opts...)
	inputs := map[string]*tidemarktest.InputTopic[string, string]{}
	for _, in := range c.in {
		it := inputs[in.topic]
		if it == nil {
			it = tidemarktest.Input(d, in.topic, serde.String(), serde.String())
			inputs[in.topic] = it
		}
		r := topology.Record[string, string]{Key: in.key, Value: in.value, Timestamp: in.ts, NullKey: in.key == null, Tombstone: in.value == tomb}
		if r.NullKey {
			r.Key = ""
		}
		if r.Tombstone {
			r.Value = ""
		}
		must(t, in.to(in.partition).pipeWith(it, r))
	}
	var got []string
	for _, r := range readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String())) {
		k := strconv.Quote(r.Key)
		if r.NullKey {
			k = "<null>"
		}
		v := r.Value
		if r.Tombstone {
			v = "<tombstone>"
		}
		got = append(got, k+"="+v)
	}
	if !slices.Equal(got, c.want) {
		t.Errorf("out:\n  got  %q\n  want %q", got, c.want)
	}
	drops := map[string]int64{}
	for k, n := range d.Metrics().DroppedBy {
		drops[k.Node+"/"+k.Reason.String()] = n
	}
	if c.drops == nil {
		c.drops = map[string]int64{}
	}
	if !maps.Equal(drops, c.drops) {
		t.Errorf("dropped:\n  got  %v\n  want %v", drops, c.drops)
	}
	return d
}

func (in nkInput) pipeWith(it *tidemarktest.InputTopic[string, string], r topology.Record[string, string]) error {
	return it.PipeRecordTo(r, in.partition)
}

func TestNullKeysStatelessAndSinks(t *testing.T) {
	cases := []nullKeyCase{
		{name: "a sink writes a null key as null and an empty key as empty",
			build: func(b *topology.Builder) { b.Stream("in", serde.String(), serde.String()).To("out") },
			in:    []nkInput{rec("in", null, "v1", 1), rec("in", "", "v2", 2), rec("in", "a", "v3", 3)},
			want:  []string{"<null>=v1", `""=v2`, `"a"=v3`}},
		{name: "stateless operators keep a null key null",
			build: func(b *topology.Builder) {
				s := b.Stream("in", serde.String(), serde.String()).
					Filter(func(_, v string) bool { return v != "drop" }).
					MapValues(func(_, v string) string { return v + "!" }).
					FlatMapValues(func(_, v string) []string { return []string{v, v} }, topology.Named("twice")).
					Peek(func(string, string) {})
				sp := s.Split()
				sp.Branch(func(_, v string) bool { return v == "x!" }).Merge(sp.Default()).To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", null, "drop", 2), rec("in", "", "y", 3), rec("in", null, tomb, 4)},
			want:  []string{"<null>=x!", "<null>=x!", `""=y!`, `""=y!`},
			drops: map[string]int64{"twice/skipped": 1}},
		{name: "mapValues passes a null-keyed tombstone on",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).MapValues(func(_, v string) string { return v + "!" }).To("out")
			},
			in:   []nkInput{rec("in", null, tomb, 1)},
			want: []string{"<null>=<tombstone>"}},
		{name: "selectKey to a string key re-keys null-keyed records from their values",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).SelectKey(func(_, v string) string { return v }).To("out")
			},
			in:   []nkInput{rec("in", null, "u1", 1), rec("in", null, "", 2)},
			want: []string{`"u1"=u1`, `""=`}},
		{name: "map and selectKey to a nil pointer make a null key",
			build: func(b *topology.Builder) {
				s := b.Stream("in", serde.String(), serde.String())
				s.SelectKey(nilIfEmpty).WithSerdes(ptrString(), nil).To("out")
				s.Map(func(k, v string) (*string, string) { return nilIfEmpty(k, v), "m:" + v }).WithSerdes(ptrString(), serde.String()).To("out")
			},
			in:   []nkInput{rec("in", "k", "", 1), rec("in", null, "u", 2)},
			want: []string{"<null>=", "<null>=m:", `"u"=u`, `"u"=m:u`}},
		{name: "flatMap keys are null when nil; tombstones are skipped and counted",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).
					FlatMap(func(k, v string) []topology.KeyValue[*string, string] {
						return []topology.KeyValue[*string, string]{{Key: nilIfEmpty(k, v), Value: "1"}, {Key: &k, Value: "2"}}
					}, topology.Named("fm")).
					WithSerdes(ptrString(), serde.String()).To("out")
			},
			in:    []nkInput{rec("in", "k", "", 1), rec("in", "k", tomb, 2)},
			want:  []string{"<null>=1", `"k"=2`},
			drops: map[string]int64{"fm/skipped": 1}},
		{name: "explicit repartition drops null keys when no left or outer join follows",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).Repartition(topology.Named("rp")).To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2)},
			want:  []string{`""=y`},
			drops: map[string]int64{"rp/null-key": 1}},
		{name: "an empty key and an empty value stay empty through a repartition topic",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).Repartition(topology.Named("rp")).To("out")
			},
			in:   []nkInput{rec("in", "", "", 1)},
			want: []string{`""=`}},
		{name: "a user processor sees the null key and can forward it",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).
					Process(func() topology.Processor[string, string, string, string] { return &nullTagger{} }).
					WithSerdes(serde.String(), serde.String()).To("out")
			},
			in:   []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2)},
			want: []string{"<null>=x null=true", `""=y null=false`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runNullKeyCase(t, c) })
	}
}

type nullTagger struct {
	ctx topology.ProcessorContext[string, string]
}

func (p *nullTagger) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	return nil
}
func (p *nullTagger) Close() error { return nil }
func (p *nullTagger) Process(r topology.Record[string, string]) error {
	r.Value = fmt.Sprintf("%s null=%v", r.Value, r.NullKey)
	return p.ctx.Forward(r)
}

func TestNullKeysAggregationsAndTables(t *testing.T) {
	cases := []nullKeyCase{
		{name: "count drops null keys, counts the empty key and skips tombstones",
			build: func(b *topology.Builder) {
				countsTo(b.Stream("in", serde.String(), serde.String()).GroupByKey().Count(topology.Named("counts")), serde.String())
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2), rec("in", "", tomb, 3), rec("in", null, tomb, 4), rec("in", "", "z", 5)},
			want:  []string{`""=1`, `""=2`},
			drops: map[string]int64{"counts/null-key": 2, "counts/skipped": 1}},
		{name: "reduce drops null keys",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).GroupByKey().
					Reduce(func(a, v string) string { return a + v }, topology.Named("joined")).ToStream().To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2), rec("in", "", "z", 3)},
			want:  []string{`""=y`, `""=yz`},
			drops: map[string]int64{"joined/null-key": 1}},
		{name: "aggregate drops null keys",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).GroupByKey().
					Aggregate(func() string { return "[" }, func(_, v, a string) string { return a + v }, serde.String(), topology.Named("agg")).
					ToStream().To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2)},
			want:  []string{`""=[y`},
			drops: map[string]int64{"agg/null-key": 1}},
		{name: "selectKey to a nil key before a count drops at the repartition",
			build: func(b *topology.Builder) {
				countsTo(b.Stream("in", serde.String(), serde.String()).SelectKey(nilIfEmpty).WithSerdes(ptrString(), nil).
					GroupByKey(topology.Named("by-value")).Count(topology.Named("counts")), ptrString())
			},
			in:    []nkInput{rec("in", "k", "", 1), rec("in", "k", "v", 2), rec("in", null, "v", 3)},
			want:  []string{`"v"=1`, `"v"=2`},
			drops: map[string]int64{"by-value/null-key": 1}},
		{name: "groupBy to a nil key drops at the repartition",
			build: func(b *topology.Builder) {
				countsTo(b.Stream("in", serde.String(), serde.String()).GroupBy(nilIfEmpty, ptrString(), topology.Named("by-value")).
					Count(topology.Named("counts")), ptrString())
			},
			in:    []nkInput{rec("in", "k", "", 1), rec("in", null, "v", 2)},
			want:  []string{`"v"=1`},
			drops: map[string]int64{"by-value/null-key": 1}},
		{name: "windowed count drops null keys",
			build: func(b *topology.Builder) {
				windowsTo(topology.WindowedBy(b.Stream("in", serde.String(), serde.String()).GroupByKey(),
					topology.TumblingWindows(10*time.Second, 0)).Count(topology.Named("per-10s")))
			},
			in:    []nkInput{rec("in", null, "x", 1000), rec("in", "", "y", 2000)},
			want:  []string{`"@0"=1`},
			drops: map[string]int64{"per-10s/null-key": 1}},
		{name: "a null-keyed record does not move a window's clock",
			build: func(b *topology.Builder) {
				windowsTo(topology.WindowedBy(b.Stream("in", serde.String(), serde.String()).GroupByKey(),
					topology.TumblingWindows(10*time.Second, 0)).Count(topology.Named("per-10s")))
			},
			// Had the null-keyed record at 60s moved the clock, a@2000 would be late.
			in:    []nkInput{rec("in", "a", "x", 1000), rec("in", null, "x", 60_000), rec("in", "a", "y", 2000)},
			want:  []string{`"a@0"=1`, `"a@0"=2`},
			drops: map[string]int64{"per-10s/null-key": 1}},
		{name: "session count drops null keys",
			build: func(b *topology.Builder) {
				windowsTo(topology.SessionWindowedBy(b.Stream("in", serde.String(), serde.String()).GroupByKey(),
					topology.SessionWindowsWithGap(time.Second, 0)).Count(topology.Named("sessions")))
			},
			in:    []nkInput{rec("in", null, "x", 1000), rec("in", "", "y", 2000)},
			want:  []string{`"@2000"=1`},
			drops: map[string]int64{"sessions/null-key": 1}},
		{name: "sliding count drops null keys",
			build: func(b *topology.Builder) {
				windowsTo(topology.SlidingWindowedBy(b.Stream("in", serde.String(), serde.String()).GroupByKey(),
					topology.SlidingWindowsWithDiff(time.Second, 0)).Count(topology.Named("sliding")))
			},
			in:    []nkInput{rec("in", null, "x", 1000), rec("in", "", "y", 2000)},
			want:  []string{`"@1000"=1`},
			drops: map[string]int64{"sliding/null-key": 1}},
		{name: "a table drops null keys and keeps the empty key as a row",
			build: func(b *topology.Builder) {
				b.Table("in", serde.String(), serde.String(), topology.Named("rows")).ToStream().To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2), rec("in", "", tomb, 3), rec("in", null, tomb, 4)},
			want:  []string{`""=y`, `""=<tombstone>`},
			drops: map[string]int64{"rows/null-key": 2}},
		{name: "toTable drops null keys",
			build: func(b *topology.Builder) {
				b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("rows")).ToStream().To("out")
			},
			in:    []nkInput{rec("in", null, "x", 1), rec("in", "", "y", 2)},
			want:  []string{`""=y`},
			drops: map[string]int64{"rows/null-key": 1}},
		{name: "table groupBy drops rows it maps to a nil key",
			build: func(b *topology.Builder) {
				countsTo(b.Table("in", serde.String(), serde.String(), topology.Named("rows")).
					GroupBy(func(k, v string) (*string, string) { return nilIfEmpty(k, v), v }, ptrString(), serde.String(), topology.Named("by-value")).
					Count(topology.Named("counts")), ptrString())
			},
			// b's row maps to no group at 2, joins "v" at 3 and leaves it at
			// 4: three of its old and new values have a nil key.
			in:    []nkInput{rec("in", "a", "v", 1), rec("in", "b", "", 2), rec("in", "b", "v", 3), rec("in", "b", "", 4)},
			want:  []string{`"v"=1`, `"v"=2`, `"v"=1`},
			drops: map[string]int64{"rows-TABLE-GROUPBY-1/null-key": 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runNullKeyCase(t, c) })
	}
}

func TestNullKeysJoins(t *testing.T) {
	streamTable := func(left bool) func(b *topology.Builder) {
		return func(b *topology.Builder) {
			prices := b.Table("prices", serde.String(), serde.String(), topology.Named("prices"))
			s := b.Stream("in", serde.String(), serde.String())
			if left {
				s.LeftJoinTable(prices, func(_, v, p string, ok bool) string { return v + "+" + opt2(p, ok) }, topology.Named("priced")).To("out")
			} else {
				s.JoinTable(prices, func(_, v, p string) string { return v + "+" + p }, topology.Named("priced")).To("out")
			}
		}
	}
	streamStream := func(kind string) func(b *topology.Builder) {
		return func(b *topology.Builder) {
			l := b.Stream("orders", serde.String(), serde.String())
			r := b.Stream("payments", serde.String(), serde.String())
			w := topology.JoinWindowsOf(10*time.Second, 0)
			var out topology.Stream[string, string]
			switch kind {
			case "inner":
				out = l.Join(r, func(_, o, p string) string { return o + "+" + p }, w, topology.Named("paid"))
			case "left":
				out = l.LeftJoin(r, func(_, o, p string, ok bool) string { return o + "+" + opt2(p, ok) }, w, topology.Named("paid"))
			case "outer":
				out = l.OuterJoin(r, func(_, o string, lok bool, p string, rok bool) string { return opt2(o, lok) + "+" + opt2(p, rok) }, w, topology.Named("paid"))
			}
			out.To("out")
		}
	}
	ssInputs := []nkInput{
		rec("orders", null, "o1", 1000), rec("payments", null, "p1", 1000),
		rec("orders", "", "o2", 2000), rec("payments", "", "p2", 3000),
		rec("orders", null, tomb, 3000),
	}
	cases := []nullKeyCase{
		{name: "stream-table inner join drops null keys",
			build: streamTable(false),
			in:    []nkInput{rec("prices", "", "1", 0), rec("in", null, "x", 1), rec("in", "", "y", 2)},
			want:  []string{`""=y+1`},
			drops: map[string]int64{"priced/null-key": 1}},
		{name: "stream-table left join emits a null key unjoined",
			build: streamTable(true),
			in:    []nkInput{rec("prices", "", "1", 0), rec("prices", null, "2", 0), rec("in", null, "x", 1), rec("in", "", "y", 2), rec("in", null, tomb, 3)},
			want:  []string{"<null>=x+none", `""=y+1`},
			drops: map[string]int64{"prices/null-key": 1, "priced/skipped": 1}},
		{name: "stream-stream inner join drops null keys on both sides",
			build: streamStream("inner"),
			in:    ssInputs,
			want:  []string{`""=o2+p2`},
			drops: map[string]int64{"paid-this/null-key": 1, "paid-other/null-key": 1, "paid-this/skipped": 1}},
		{name: "stream-stream left join emits a left null key at once and drops a right one",
			build: streamStream("left"),
			in:    ssInputs,
			want:  []string{"<null>=o1+none", `""=o2+p2`},
			drops: map[string]int64{"paid-other/null-key": 1, "paid-this/skipped": 1}},
		{name: "stream-stream outer join emits null keys of either side at once",
			build: streamStream("outer"),
			in:    ssInputs,
			want:  []string{"<null>=o1+none", "<null>=none+p1", `""=o2+p2`},
			drops: map[string]int64{"paid-this/skipped": 1}},
		{name: "a repartition before a left join keeps null keys",
			build: func(b *topology.Builder) {
				prices := b.Table("prices", ptrString(), serde.String(), topology.Named("prices"))
				b.Stream("in", serde.String(), serde.String()).SelectKey(nilIfEmpty).WithSerdes(ptrString(), nil).
					LeftJoinTable(prices, func(k *string, v, p string, ok bool) string { return keyOf(k) + ":" + v + "+" + opt2(p, ok) }, topology.Named("priced")).
					To("out")
			},
			in:   []nkInput{rec("prices", "v", "1", 0), rec("in", "k", "", 1), rec("in", "k", "v", 2)},
			want: []string{"<null>=<nil>:+none", `"v"=v:v+1`}},
		{name: "a repartition before an inner join drops null keys",
			build: func(b *topology.Builder) {
				prices := b.Table("prices", ptrString(), serde.String(), topology.Named("prices"))
				b.Stream("in", serde.String(), serde.String()).SelectKey(nilIfEmpty).WithSerdes(ptrString(), nil).
					JoinTable(prices, func(k *string, v, p string) string { return v + "+" + p }, topology.Named("priced")).
					To("out")
			},
			in:    []nkInput{rec("prices", "v", "1", 0), rec("in", "k", "", 1), rec("in", "k", "v", 2)},
			want:  []string{`"v"=v+1`},
			drops: map[string]int64{"priced-left/null-key": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runNullKeyCase(t, c) })
	}
}

// The case: a count over a topic whose producer spreads null-keyed
// records over both partitions, mixed with empty-keyed ones. The empty key
// is one key, counted in the one task its partition belongs to; null keys
// are dropped and counted in whichever task read them; the output never
// merges the two.
func TestCountKeepsNullAndEmptyKeysApartAcrossPartitions(t *testing.T) {
	c := nullKeyCase{
		build: func(b *topology.Builder) {
			countsTo(b.Stream("in", serde.String(), serde.String()).GroupByKey().Count(topology.Named("counts")), serde.String())
		},
		in: []nkInput{
			rec("in", null, "a", 1).to(0), rec("in", "", "b", 2), rec("in", null, "c", 3).to(1),
			rec("in", null, "d", 4).to(1), rec("in", "", "e", 5), rec("in", "x", "f", 6),
		},
		want:  []string{`""=1`, `""=2`, `"x"=1`},
		drops: map[string]int64{"counts/null-key": 3},
	}
	d := runNullKeyCase(t, c, tidemarktest.WithDefaultPartitions(2))
	want := map[int32]int64{0: 1, 1: 2} // the null-keyed records each task read
	for _, tk := range d.Tasks() {
		p := tk.ID().Partition
		if got := tk.Metrics().DroppedBy[task.DropKey{Node: "counts", Reason: topology.DropNullKey}]; got != want[p] {
			t.Errorf("task %s dropped %d null-keyed records, want %d", tk.ID(), got, want[p])
		}
	}
	rows, err := tidemarktest.ReadStore(d, "counts", serde.String(), serde.Int64())
	must(t, err)
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("p%d %q=%d", r.Partition, r.Key, r.Value))
	}
	slices.Sort(got)
	wantRows := []string{
		fmt.Sprintf("p%d %q=2", task.DefaultPartition([]byte{}, 2), ""),
		fmt.Sprintf("p%d %q=1", task.DefaultPartition([]byte("x"), 2), "x"),
	}
	slices.Sort(wantRows)
	if !slices.Equal(got, wantRows) {
		t.Errorf("store rows %v, want %v: one row per key, in the task of its partition", got, wantRows)
	}
}
