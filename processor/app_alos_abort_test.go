package processor_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestAtLeastOnceNeverSkipsAnInputWhoseOutputFailed makes one output
// impossible to produce (larger than the sink topic accepts): the aborted
// work must be retried from the committed offsets, never skipped, so the
// group's committed offset never passes that input.
func TestAtLeastOnceNeverSkipsAnInputWhoseOutputFailed(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	// Incompressible, so that the batch exceeds the limit after compression.
	raw := make([]byte, 4096)
	_, _ = rand.Read(raw)
	big := string(raw)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "alos"))
	b.Stream(in, serde.String(), serde.String()).MapValues(func(_, v string) string {
		if v == "big" {
			return big
		}
		return v
	}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	produce := func(vs ...string) {
		var recs []*kgo.Record
		for _, v := range vs {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(v), Value: []byte(v)})
		}
		kafkatest.Produce(t, recs...)
	}
	produce("a", "b", "big")
	startApp(t, topo, processor.WithGuarantee(processor.AtLeastOnce))
	time.Sleep(2 * time.Second) // the app fails to produce big's output and aborts
	produce("c", "d")
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got := committedOffsets(t, topo.Application(), in)[0]; got > 2 {
			t.Fatalf("committed offset %d passes the input at 2 whose output was never written", got)
		}
	}
}
