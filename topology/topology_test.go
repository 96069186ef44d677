package topology_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

func names(t *testing.T, topo *topology.Topology) (nodes, stores, topics []string) {
	t.Helper()
	for _, st := range topo.Describe().SubTopologies {
		for _, n := range st.Nodes {
			nodes = append(nodes, n.Name)
		}
	}
	for _, s := range topo.Stores() {
		stores = append(stores, s.Spec.Name)
	}
	for _, r := range topo.RepartitionTopics() {
		topics = append(topics, r.Name)
	}
	for _, c := range topo.ChangelogTopics() {
		topics = append(topics, c.Name)
	}
	return nodes, stores, topics
}

// marketplace builds two independent chains; extra adds an operator at the
// top of the clicks chain.
func marketplace(extra bool) *topology.Builder {
	b := topology.NewBuilder("shop")
	clicks := b.Stream("clicks", serde.String(), serde.String())
	if extra {
		clicks = clicks.Filter(func(_, v string) bool { return v != "" })
	}
	clicks.GroupBy(func(_, page string) string { return page }, serde.String()).Count().ToStream().To("page-views")
	b.Stream("payments", serde.String(), serde.Int64()).
		SelectKey(func(k string, _ int64) string { return k }).
		GroupByKey().
		Aggregate(func() int64 { return 0 }, func(_ string, v, agg int64) int64 { return agg + v }, serde.Int64()).
		ToStream().To("spend")
	return b
}

func TestAddingAnOperatorDoesNotRenameOtherChains(t *testing.T) {
	before, err := marketplace(false).Build()
	if err != nil {
		t.Fatal(err)
	}
	after, err := marketplace(true).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, storesBefore, topicsBefore := names(t, before)
	_, storesAfter, topicsAfter := names(t, after)
	for _, s := range storesBefore {
		if strings.HasPrefix(s, "payments") && !slices.Contains(storesAfter, s) {
			t.Errorf("store %q of the payments chain was renamed by a filter on clicks; after: %v", s, storesAfter)
		}
	}
	for _, tp := range topicsBefore {
		if strings.Contains(tp, "payments") && !slices.Contains(topicsAfter, tp) {
			t.Errorf("topic %q of the payments chain was renamed by a filter on clicks; after: %v", tp, topicsAfter)
		}
	}
}

func TestGeneratedNamesAreDeterministic(t *testing.T) {
	a, err := marketplace(true).Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := marketplace(true).Build()
	if err != nil {
		t.Fatal(err)
	}
	if a.Describe().String() != b.Describe().String() {
		t.Errorf("two builds of the same topology describe differently:\n%s\n%s", a.Describe(), b.Describe())
	}
}

func TestNamedOperatorAnchorsDownstreamNames(t *testing.T) {
	build := func(extra bool) []string {
		b := topology.NewBuilder("shop")
		s := b.Stream("clicks", serde.String(), serde.String())
		if extra {
			s = s.Peek(func(string, string) {})
		}
		s.Filter(func(_, v string) bool { return true }, topology.Named("valid-clicks")).
			GroupByKey().Count().ToStream().To("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		_, stores, _ := names(t, topo)
		return stores
	}
	if a, b := build(false), build(true); !slices.Equal(a, b) {
		t.Errorf("stores downstream of a named operator changed when an operator was added above it: %v vs %v", a, b)
	}
}

func TestExplicitNamesGiveInternalTopicNames(t *testing.T) {
	b := topology.NewBuilder("shop")
	b.Stream("cart", serde.String(), serde.Int64()).
		GroupBy(func(k string, _ int64) string { return k }, serde.String(), topology.Named("by-sku")).
		Count(topology.Named("cart-totals"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, stores, topics := names(t, topo)
	if !slices.Equal(stores, []string{"cart-totals"}) || !slices.Equal(topics, []string{"shop-by-sku-repartition", "shop-cart-totals-changelog"}) {
		t.Errorf("stores %v topics %v, want [cart-totals] [shop-by-sku-repartition shop-cart-totals-changelog]", stores, topics)
	}
	info, _ := topo.Store("cart-totals")
	if info.Spec.Kind != store.KindKeyValue || !info.Spec.Logged || !info.Timestamped {
		t.Errorf("cart-totals spec = %+v, want a logged, timestamped key-value store", info)
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name     string
		build    func(b *topology.Builder)
		sentinel error
		mention  string
	}{
		{"sink without a value serde after a type change names the sink", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).
				MapValues(func(_, v string) int { return len(v) }, topology.Named("lengths")).
				To("out", topology.Named("lengths-out"))
		}, topology.ErrMissingSerde, `"lengths-out"`},
		{"aggregate without a serde for its key names the aggregation", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).
				Map(func(k, v string) (int, string) { return len(k), v }).
				GroupByKey(topology.Named("by-len")).
				Count(topology.Named("count-by-len"))
		}, topology.ErrMissingSerde, `"by-len"`},
		{"source without serdes", func(b *topology.Builder) {
			b.Stream[string, string]("in", nil, serde.String())
		}, topology.ErrMissingSerde, `"in-SOURCE"`},
		{"two operators with one name", func(b *topology.Builder) {
			s := b.Stream("in", serde.String(), serde.String())
			s.Filter(func(_, _ string) bool { return true }, topology.Named("f"))
			s.Filter(func(_, _ string) bool { return true }, topology.Named("f"))
		}, topology.ErrDuplicateName, `"f"`},
		{"two sources on one topic", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String())
			b.Stream("in", serde.String(), serde.String(), topology.Named("again"))
		}, topology.ErrDuplicateName, `"again"`},
		{"hopping advance larger than size", func(b *topology.Builder) {
			g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
			topology.WindowedBy(g, topology.HoppingWindows(time.Second, time.Minute, 0)).Count(topology.Named("w"))
		}, topology.ErrInvalidWindow, `"w"`},
		{"retention shorter than grace", func(b *topology.Builder) {
			g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
			topology.WindowedBy(g, topology.TumblingWindows(time.Second, time.Minute)).Count(topology.Named("w"), topology.WithRetention(time.Second))
		}, topology.ErrInvalidWindow, `"w"`},
		{"repartition options on a GroupByKey that needs no repartition are rejected, not ignored", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).GroupByKey(topology.WithPartitions(3)).Count(topology.Named("c"))
		}, topology.ErrInvalidTopology, "GroupByKey options apply only when a repartition is needed"},
		{"processor asking for an undeclared store", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).Process(func() topology.Processor[string, string, string, string] { return nil },
				topology.Named("p"), topology.WithStores("nope"))
		}, topology.ErrUnknownStore, `"p"`},
		{"timestamp extractor for other types", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String(), topology.WithTimestampExtractor(func(r topology.Record[string, int64], _ int64) int64 { return 0 }))
		}, topology.ErrInvalidTopology, `"in-SOURCE"`},
		{"generated store name under RequireNamedState", func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).GroupByKey().Count()
		}, topology.ErrInvalidTopology, "RequireNamedState"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts []topology.BuilderOption
			if strings.Contains(c.name, "RequireNamedState") {
				opts = append(opts, topology.RequireNamedState())
			}
			b := topology.NewBuilder("app", opts...)
			c.build(b)
			_, err := b.Build()
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("Build() = %v, want %v", err, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("Build() = %v, want it to mention %s", err, c.mention)
			}
		})
	}
}

func TestDescribeGolden(t *testing.T) {
	topo, err := marketplace(false).Build()
	if err != nil {
		t.Fatal(err)
	}
	got := topo.Describe().String()
	path := filepath.Join("testdata", "describe-marketplace.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Describe() differs from %s:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func TestSubTopologiesListTopicsAndStores(t *testing.T) {
	topo, err := marketplace(false).Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.SubTopologies()
	if len(subs) != 4 {
		t.Fatalf("got %d sub-topologies, want 4:\n%s", len(subs), topo.Describe())
	}
	if !slices.Equal(subs[0].SourceTopics, []string{"clicks"}) || len(subs[0].Stores) != 0 {
		t.Errorf("sub-topology 0 = %+v, want the clicks source without stores", subs[0])
	}
	if len(subs[1].RepartitionSources) != 1 || len(subs[1].Stores) != 1 || !slices.Equal(subs[1].SinkTopics, []string{"page-views"}) {
		t.Errorf("sub-topology 1 = %+v, want a repartition source, one store, sink page-views", subs[1])
	}
	if !slices.Equal(topo.SinkTopics(), []string{"page-views", "shop-clicks-REPARTITION-2-repartition", "shop-payments-REPARTITION-2-repartition", "spend"}) {
		t.Errorf("sink topics = %v", topo.SinkTopics())
	}
}

func TestDeduplicateDeclaresAStore(t *testing.T) {
	str := serde.String()
	b := topology.NewBuilder("app")
	b.Stream("in", str, str).Deduplicate(func(_, v string) string { return v }, time.Minute, topology.Named("seen")).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `Topologies:
   Sub-topology: 0
    Source: in-SOURCE (topics: [in])
      --> seen
    Processor: seen (stores: [seen])
      --> seen-SINK-1
      <-- in-SOURCE
    Sink: seen-SINK-1 (topic: out)
      <-- seen

`
	if got := topo.String(); got != want {
		t.Errorf("describe:\n%s\nwant:\n%s", got, want)
	}
	if cl := topo.ChangelogTopics(); len(cl) != 1 || cl[0].Name != "app-seen-changelog" || cl[0].Config["cleanup.policy"] != "compact" {
		t.Errorf("changelogs = %+v, want app-seen-changelog, compacted", cl)
	}

	b = topology.NewBuilder("app")
	b.Stream("in", str, str).Deduplicate(func(_, v string) string { return v }, 0).To("out")
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalidWindow) {
		t.Errorf("window 0: Build error %v, want ErrInvalidWindow", err)
	}
	b = topology.NewBuilder("app", topology.RequireNamedState())
	b.Stream("in", str, str).Deduplicate(func(_, v string) string { return v }, time.Minute).To("out")
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "in-DEDUPLICATE-1") {
		t.Errorf("unnamed under RequireNamedState: Build error %v, want one naming in-DEDUPLICATE-1", err)
	}
}

// The application id prefixes internal topic names: what Kafka refuses in
// a topic name fails Build, naming the id, before anything is created.
func TestBuildRejectsAnApplicationIDKafkaWouldRefuse(t *testing.T) {
	for id, want := range map[string]string{
		"":                       "empty application id",
		"bad name/with slash":    `application id "bad name/with slash": only ASCII letters`,
		"shop:eu":                `application id "shop:eu"`,
		strings.Repeat("a", 201): "at most 200",
	} {
		b := topology.NewBuilder(id)
		b.Stream("in", serde.String(), serde.String()).To("out")
		if _, err := b.Build(); !errors.Is(err, topology.ErrInvalidTopology) || !strings.Contains(err.Error(), want) {
			t.Errorf("Build with application id %q: %v, want ErrInvalidTopology mentioning %q", id, err, want)
		}
	}
	b := topology.NewBuilder("shop.eu_2-orders")
	b.Stream("in", serde.String(), serde.String()).To("out")
	if _, err := b.Build(); err != nil {
		t.Errorf("a legal id: %v", err)
	}
}
