package dsl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// A task started on a backlog waits for its input partition with records
// on the broker (KIP-695) also while that partition's fetches bring
// nothing: an aborted transaction of several fetches' worth (read_committed
// drops its records) sits between its first records and its next ones.
// Such a fetch reaches the loop as the partition with no records, beside
// another partition's records (here the other task's backlog), and was
// taken as the partition caught up: the task processed its other input's
// records, a minute later in event time, and the windowed count dropped
// the records after the aborted transaction as late.
func TestBacklogWaitsAcrossAnAbortedTransaction(t *testing.T) {
	const partitions = 2
	const size, grace = 10_000, 2_000
	orders := kafkatest.NewTopic(t, partitions, nil)
	refunds := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "backlog-aborted")
	topo := mergedWindowedCount(t, app, orders, refunds, out, size, grace)
	// k0 on partition 0 (the task under test), k1 on partition 1 (the
	// backlog whose records come in every fetch).
	var k0, k1 string
	for i := 0; k0 == "" || k1 == ""; i++ {
		k := fmt.Sprint("seller-", i)
		if processor.DefaultPartition([]byte(k), partitions) == 0 && k0 == "" {
			k0 = k
		} else if processor.DefaultPartition([]byte(k), partitions) == 1 && k1 == "" {
			k1 = k
		}
	}
	base := (time.Now().Add(-time.Hour).UnixMilli() / size) * size
	want := map[string]string{}
	rng := seeded(t)
	// noise is n random letters: values that do not compress, so that
	// the byte counts below are what a fetch carries.
	noise := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	burst := func(key string, from int64, n int, pad int) []record {
		recs := make([]record, n)
		for i := range recs {
			recs[i] = record{key: key, value: noise(pad), ts: from + int64(i)*size/int64(n)}
		}
		return recs
	}
	produce(t, orders, partitions, burst(k0, base, 100, 10)...)
	want[fmt.Sprintf("%s@%d", k0, base)] = "100"
	aborted := make([]*kgo.Record, 4000) // ~4 MB: four fetches of 1 MiB
	for i := range aborted {
		aborted[i] = &kgo.Record{Topic: orders, Partition: 0, Key: []byte(k0), Value: []byte(noise(1000)),
			Timestamp: time.UnixMilli(base + size)}
	}
	produceTxn(t, false, aborted...)
	produce(t, orders, partitions, burst(k0, base+size, 100, 10)...)
	want[fmt.Sprintf("%s@%d", k0, base+size)] = "100"
	produce(t, refunds, partitions, burst(k0, base+6*size, 10, 10)...)
	want[fmt.Sprintf("%s@%d", k0, base+6*size)] = "10"
	for w := range int64(6) {
		produce(t, orders, partitions, burst(k1, base+w*size, 1000, 1000)...) // 6 MB
		want[fmt.Sprintf("%s@%d", k1, base+w*size)] = "1000"
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
	t.Logf("%d windows counted in full", len(want))
}
