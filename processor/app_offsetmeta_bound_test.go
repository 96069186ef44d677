package processor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// windowedCounts is one sub-topology of n windowed counts named
// <prefix>-NN, each emitting final results (a window store, its
// -EMIT-CURSOR, a clock).
func windowedCounts(t *testing.T, n int, prefix string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app")
	g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
	for i := range n {
		topology.WindowedBy(g, topology.TumblingWindows(time.Minute, 0)).
			Count(topology.Named(fmt.Sprintf("%s-%02d", prefix, i)), topology.EmitFinal())
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// A sub-topology whose commit metadata can be over the broker's default
// offset.metadata.max.bytes had every transaction refused at run time
// (OFFSET_METADATA_TOO_LARGE), the task restarting without end; NewApp
// refuses it, naming the limit and what to change. One of realistic size
// is accepted.
func TestNewAppRefusesATopologyWhoseCommitMetadataCannotFit(t *testing.T) {
	t.Parallel()
	big := windowedCounts(t, 150, "velocity-per-user-and-merchant-over-five-minutes")
	_, err := processor.NewApp(big, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir()))
	if err == nil {
		t.Fatal("NewApp accepted a sub-topology of 150 windowed operators whose commit metadata cannot fit 4096 bytes")
	}
	for _, want := range []string{"offset.metadata.max.bytes", "4096", "sub-topology 0", "shorter names"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	small := windowedCounts(t, 20, "velocity-per-user-and-merchant-over-five-minutes")
	if _, err := processor.NewApp(small, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir())); err != nil {
		t.Fatalf("NewApp refused 20 windowed operators: %v", err)
	}
}

// A cluster whose brokers raised offset.metadata.max.bytes takes a larger
// sub-topology once the App is told the limit; a negative limit is refused.
func TestOffsetMetadataMaxBytesFollowsTheBrokers(t *testing.T) {
	t.Parallel()
	big := windowedCounts(t, 150, "velocity-per-user-and-merchant-over-five-minutes")
	if _, err := processor.NewApp(big, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir()),
		processor.WithOffsetMetadataMaxBytes(64<<10)); err != nil {
		t.Fatalf("NewApp refused 150 windowed operators under a 64 KiB limit: %v", err)
	}
	_, err := processor.NewApp(big, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir()),
		processor.WithOffsetMetadataMaxBytes(2048))
	if err == nil || !strings.Contains(err.Error(), "(2048;") {
		t.Fatalf("NewApp under a 2048-byte limit: %v, want a refusal naming 2048", err)
	}
	_, err = processor.NewApp(big, processor.WithBrokers("b:9092"), processor.WithStateDir(t.TempDir()),
		processor.WithOffsetMetadataMaxBytes(-1))
	if err == nil || !strings.Contains(err.Error(), "OffsetMetadataMaxBytes") {
		t.Fatalf("NewApp with a negative limit: %v, want an error naming OffsetMetadataMaxBytes", err)
	}
}
