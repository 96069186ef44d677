package processor_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestWindowFinalCommitsBeforeTheRestOfThePass: under the adaptive policy,
// a record that closes a window ends the record loop's pass, so the
// window's final commits at once instead of after everything else the
// pass would take. One partition holds a window's record, the record that
// closes it, then a 20k-record backlog (~20µs each); the pass limit is off,
// so without that rule the final would commit only after the whole
// backlog. It must become visible to a read_committed reader while most
// of the backlog is still to do, and every window's final exactly once.
func TestWindowFinalCommitsBeforeTheRestOfThePass(t *testing.T) {
	t.Parallel()
	const backlog = 20_000
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "finals")
	var processed atomic.Int64 // backlog records processed
	b := topology.NewBuilder(appID)
	s := b.Stream(in, serde.String(), serde.String()).Filter(func(k, _ string) bool {
		if k == "hot" {
			spin(20 * time.Microsecond)
			processed.Add(1)
		}
		return true
	})
	topology.WindowedBy(s.GroupByKey(topology.Named("by-key")), topology.TumblingWindows(time.Second, 0)).
		Count(topology.Named("window-counts"), topology.EmitFinal()).ToStream().
		Map(func(w topology.Windowed[string], n int64) (string, string) {
			return w.Key + "@" + strconv.FormatInt(w.Start, 10), strconv.FormatInt(n, 10)
		}).
		WithSerdes(serde.String(), serde.String()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	recs := []*kgo.Record{
		{Topic: in, Key: []byte("k"), Value: []byte("a"), Timestamp: at(0)},
		{Topic: in, Key: []byte("k"), Value: []byte("b"), Timestamp: at(10_000)}, // closes k's first window
	}
	for i := range backlog {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("hot"), Value: []byte(strconv.Itoa(i)), Timestamp: at(10_000)})
	}
	recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("c"), Timestamp: at(20_000)}) // closes the rest
	kafkatest.Produce(t, recs...)

	var mu sync.Mutex
	got := map[string]string{}
	seen := map[string]int{}
	remaining := int64(-1)
	first := strconv.FormatInt(at(0).UnixMilli(), 10)
	watchOutputs(t, out, func(r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		got[string(r.Key)] = string(r.Value)
		seen[string(r.Key)]++
		if string(r.Key) == "k@"+first && remaining < 0 {
			remaining = backlog - processed.Load()
		}
	})
	runApp(t, topo, processor.WithMaxRecordsPerTaskPass(processor.UnlimitedRecordsPerTaskPass),
		func(c *processor.Config) { c.PollRecords = 100_000 },
		processor.WithClientOpts(kgo.FetchMaxPartitionBytes(32<<20)))
	second := strconv.FormatInt(at(10_000).UnixMilli(), 10)
	want := map[string]string{"k@" + first: "1", "k@" + second: "1", "hot@" + second: strconv.Itoa(backlog)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d window finals after 60s", n, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // duplicates, if any, would show by now
	mu.Lock()
	defer mu.Unlock()
	for k, v := range want {
		if got[k] != v || seen[k] != 1 {
			t.Errorf("final %s = %q seen %d times, want %q once", k, got[k], seen[k], v)
		}
	}
	t.Logf("first final visible with %d of %d backlog records left", remaining, backlog)
	if remaining < backlog/2 {
		t.Errorf("the first window's final became visible with %d of %d backlog records left, want more than half: "+
			"it waited for the rest of the pass", remaining, backlog)
	}
}
