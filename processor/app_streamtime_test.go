package processor_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestRestartKeepsStreamTimeSoLateRecordsStayLate runs a 10 s tumbling
// count with no grace, moves stream time to 100 s, stops, and restarts on
// a record for the first window: it was late before the restart, so it
// must be late after it (the committed offsets carry the stream time). A
// task that restarted from stream time -1 would count it.
func TestRestartKeepsStreamTimeSoLateRecordsStayLate(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "st"))
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 0)).
		Count(topology.Named("per-window")).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rec := func(ms int64) *kgo.Record {
		return &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
	}
	// counts reads the outputs as window start → last count.
	counts := func(n int) map[int64]int64 {
		t.Helper()
		got := map[int64]int64{}
		for _, r := range kafkatest.ConsumeExactly(t, out, n, time.Minute, 2*time.Second) {
			if len(r.Key) != 1+8 || len(r.Value) != 8 { // k, then the start (Kafka Streams' TimeWindowedSerializer)
				t.Fatalf("output %x=%x is not a windowed count of key k", r.Key, r.Value)
			}
			got[int64(binary.BigEndian.Uint64(r.Key[1:9]))] = int64(binary.BigEndian.Uint64(r.Value))
		}
		return got
	}
	dir := t.TempDir()

	kafkatest.Produce(t, rec(1_000), rec(100_000))
	_, stop := runApp(t, topo, processor.WithStateDir(dir))
	if got := counts(2); fmt.Sprint(got) != fmt.Sprint(map[int64]int64{0: 1, 100_000: 1}) {
		t.Fatalf("before the restart: counts %v, want window 0 and window 100000 at 1", got)
	}
	stop()

	// 2 s is 98 s behind stream time: late. 100.5 s counts, and tells the
	// test the restarted app has read past the late record.
	kafkatest.Produce(t, rec(2_000), rec(100_500))
	runApp(t, topo, processor.WithStateDir(dir))
	if got := counts(3); fmt.Sprint(got) != fmt.Sprint(map[int64]int64{0: 1, 100_000: 2}) {
		t.Fatalf("after the restart: counts %v, want window 0 still 1 (its record was late) and window 100000 at 2", got)
	}
}
