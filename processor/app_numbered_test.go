package processor_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Two unnamed counts of one grouped stream are told apart only by
// declaration order, so adding a third before them would hand their state
// to the wrong operator: NewApp warns, naming them.
func TestNewAppWarnsOfOrderNumberedState(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	g.Count()
	g.Count()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := processor.NewApp(topo, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir()),
		processor.WithLogger(slog.New(slog.NewTextHandler(&buf, nil)))); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "in-COUNT-1") || !strings.Contains(out, "in-COUNT-1-2") || !strings.Contains(out, "Named") {
		t.Fatalf("log %q: want a warning naming in-COUNT-1 and in-COUNT-1-2 and how to fix it", out)
	}
}
