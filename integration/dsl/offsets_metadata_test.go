package dsl_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A task with thirty EmitFinal window aggregations of descriptive names
// commits, and emits every final: the stream times and changelog
// positions the commit stores with its offsets once exceeded the broker's
// offset.metadata.max.bytes, so every transaction aborted with
// OFFSET_METADATA_TOO_LARGE and the task restarted without end, emitting
// nothing.
func TestManyWindowedOperatorsCommit(t *testing.T) {
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	app := kafkatest.UniqueName(t, "app")
	b := topology.NewBuilder(app)
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	const n = 30
	for i := range n {
		name := fmt.Sprintf("velocity-per-user-and-merchant-over-five-minutes-%02d", i) + strings.Repeat("x", 10)
		topology.WindowedBy(g, topology.TumblingWindows(time.Second, 0)).Count(topology.Named(name), topology.EmitFinal()).
			ToStream().Map(func(w topology.Windowed[string], c int64) (string, string) { return w.Key, fmt.Sprint(c) }).
			WithSerdes(serde.String(), serde.String()).To(out)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).UnixMilli()
	produce(t, in, 1, record{key: "k", value: "a", ts: base}, record{key: "k", value: "b", ts: base + 5000})
	startApp(t, topo, t.TempDir())
	readUntil(t, out, 60*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= n })
}
