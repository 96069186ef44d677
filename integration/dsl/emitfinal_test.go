package dsl_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// finalModel is a tumbling EmitFinal count for one task (one partition),
// from Kafka Streams' KStreamWindowAggregate with onWindowClose: the
// operator's stream time, the open windows' counts, and the finals
// emitted, each once, when stream time − grace reaches the window's end.
type finalModel struct {
	size, grace int64
	observed    int64
	open        map[[2]string]int64 // {key, start} → count
	out         []string            // "key@start=count"
}

func (m *finalModel) add(r record) {
	m.observed = max(m.observed, r.ts)
	closeTime := m.observed - m.grace
	start := r.ts - r.ts%m.size
	if start+m.size > closeTime {
		m.open[[2]string{r.key, strconv.FormatInt(start, 10)}]++
	}
	var due []string
	for w, n := range m.open {
		s, _ := strconv.ParseInt(w[1], 10, 64)
		if s+m.size <= closeTime {
			due = append(due, fmt.Sprintf("%s@%d=%d", w[0], s, n))
			delete(m.open, w)
		}
	}
	slices.Sort(due)
	m.out = append(m.out, due...)
}

// An EmitFinal window aggregation restarted with a fresh state dir (its
// stores restored from their changelogs) emits every window's final
// exactly once: none repeated for windows finalised before the restart,
// none lost for windows open across it, and records late by the stream
// time reached before the restart are late after it.
func TestEmitFinalAcrossRestart(t *testing.T) {
	const partitions = 2
	const size, grace = 1000, 500
	rng := seeded(t)
	in := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "app")
	build := func() *topology.Topology {
		b := topology.NewBuilder(app, topology.RequireNamedState())
		g := b.Stream(in, serde.String(), serde.String()).GroupByKey(topology.Named("by-key"))
		topology.WindowedBy(g, topology.TumblingWindows(size*time.Millisecond, grace*time.Millisecond)).
			Count(topology.Named("finals"), topology.EmitFinal()).ToStream().
			Map(func(w topology.Windowed[string], n int64) (string, string) {
				return fmt.Sprintf("%s@%d", w.Key, w.Start), strconv.FormatInt(n, 10)
			}).
			WithSerdes(serde.String(), serde.String()).To(out)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	models := make([]*finalModel, partitions)
	for p := range models {
		models[p] = &finalModel{size: size, grace: grace, observed: -1, open: map[[2]string]int64{}}
	}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	base := (time.Now().Add(-time.Hour).UnixMilli() / size) * size
	gen := func(n int) []record {
		recs := make([]record, 0, n)
		for range n {
			base += rng.Int64N(60)
			r := record{key: keys[rng.IntN(len(keys))], value: "x", ts: base}
			if rng.IntN(5) == 0 { // out of order, some beyond the grace
				r.ts -= rng.Int64N(2 * (size + grace))
			}
			recs = append(recs, r)
			models[processor.DefaultPartition([]byte(r.key), partitions)].add(r)
		}
		return recs
	}
	emitted := func() int {
		n := 0
		for _, m := range models {
			n += len(m.out)
		}
		return n
	}

	first := gen(300)
	n1 := emitted()
	produce(t, in, partitions, first...)
	stop := startApp(t, build(), t.TempDir())
	readUntil(t, out, 45*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= n1 })
	stop()
	second := gen(300)
	n := emitted()
	produce(t, in, partitions, second...)
	startApp(t, build(), t.TempDir()) // a fresh state dir: restore from the changelogs
	got := kafkatest.ConsumeExactly(t, out, n, 45*time.Second, 3*time.Second)

	// The sink re-keys, so finals land on other partitions than their
	// task's: compare them all, each exactly once.
	var gotAll, want []string
	for _, r := range got {
		gotAll = append(gotAll, string(r.Key)+"="+string(r.Value))
	}
	for _, m := range models {
		want = append(want, m.out...)
	}
	slices.Sort(gotAll)
	slices.Sort(want)
	if !slices.Equal(gotAll, want) {
		t.Errorf("%d finals, model %d\n got:   %v\n model: %v", len(gotAll), len(want), gotAll, want)
	}
	if n1 == 0 || n == n1 {
		t.Errorf("%d finals before the restart, %d after: the input does not exercise the restart", n1, n-n1)
	}
}
