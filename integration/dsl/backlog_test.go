package dsl_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A service started on a backlog (after downtime, or on input produced
// before it) gives the results it gives live. Two co-partitioned inputs, a
// large one (carts: megabytes per partition, fetched batch by batch) and a
// small one (captures: fetched whole at once), both in event-time order,
// are merged into a windowed count with a 2 s grace. Taking the small
// input's records while the large one still had records on the broker
// ran the task's stream time to the small input's end after the large
// one's first batch, and the windowed count dropped nearly all of the
// large input's later records as late; a task now waits for them, as in
// Kafka Streams (KIP-695).
func TestBacklogOfMergedInputsDropsNothingAsLate(t *testing.T) {
	const partitions = 2
	const size, grace, span = 10_000, 2_000, 120_000
	carts := kafkatest.NewTopic(t, partitions, nil)
	captures := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "backlog")
	topo := mergedWindowedCount(t, app, carts, captures, out, size, grace)

	sellers := []string{"s1", "s2", "s3", "s4"}
	base := (time.Now().Add(-time.Hour).UnixMilli() / size) * size
	want := map[string]string{}
	counts := map[string]int{}
	gen := func(n int, pad int) []record {
		recs := make([]record, 0, n)
		for i := range n {
			ts := base + int64(i)*span/int64(n)
			key := sellers[i%len(sellers)]
			recs = append(recs, record{key: key, value: strings.Repeat("x", pad), ts: ts})
			counts[fmt.Sprintf("%s@%d", key, ts-ts%size)]++
		}
		return recs
	}
	produce(t, carts, partitions, gen(40_000, 300)...) // ~6 MB a partition: several fetches
	produce(t, captures, partitions, gen(400, 20)...)
	total := 0
	for k, n := range counts {
		want[k] = strconv.Itoa(n)
		total += n
	}

	startApp(t, topo, t.TempDir())
	var got map[string]string
	readUntil(t, out, 90*time.Second, func(recs []*kgo.Record) bool {
		got = latest(recs)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	t.Logf("%d windows, %d records, every window counted in full", len(want), total)
}

// mergedWindowedCount counts the records of two merged inputs per key in
// tumbling windows of size ms with grace ms, writing "key@start" = count
// to out.
func mergedWindowedCount(t *testing.T, app, in1, in2, out string, size, grace int64) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app, topology.RequireNamedState())
	s1 := b.Stream(in1, serde.String(), serde.String())
	s2 := b.Stream(in2, serde.String(), serde.String())
	topology.WindowedBy(s1.Merge(s2).GroupByKey(topology.Named("by-seller")), topology.TumblingWindows(time.Duration(size)*time.Millisecond, time.Duration(grace)*time.Millisecond)).
		Count(topology.Named("activity")).ToStream().
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
