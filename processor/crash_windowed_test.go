package processor_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

const (
	crashWindow = int64(1000) // ms
	crashGrace  = int64(200)
)

// buildWindowedCount counts per key in 1 s tumbling windows with 200 ms
// grace, emitting every update.
func buildWindowedCount(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(time.Duration(crashWindow)*time.Millisecond, time.Duration(crashGrace)*time.Millisecond)).
		Count(topology.Named("per-window")).ToStream().To(out)
	return b.Build()
}

type windowKey struct {
	key   string
	start int64
}

// windowedReference replays each partition's records in offset order
// through the rule of a window aggregation: its clock is the largest
// timestamp it has seen, and a record whose window ended at or before the
// clock minus grace is dropped. It returns each window's final count.
func windowedReference(byPartition map[int32][]*kgo.Record) (counts map[windowKey]int64, late int) {
	counts = map[windowKey]int64{}
	for _, recs := range byPartition {
		clock := int64(-1)
		for _, r := range recs {
			ts := r.Timestamp.UnixMilli()
			clock = max(clock, ts)
			start := ts - ts%crashWindow
			if start+crashWindow <= clock-crashGrace {
				late++
				continue
			}
			counts[windowKey{string(r.Key), start}]++
		}
	}
	return counts, late
}

// TestWindowedExactlyOnceUnderCrashes is TestExactlyOnceUnderCrashes for a
// windowed count over disordered input (records up to 1.5 s behind the
// newest, so some are late): it SIGKILLs the service process mid-stream
// and at its commit points, restarts it on the same state, and checks every
// output against a reference run of the same input: each window's counts
// are exactly 1..n, n the reference's, so no update is lost or repeated and
// a record late before a crash is not counted after it.
func TestWindowedExactlyOnceUnderCrashes(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	env := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_TOPOLOGY=windowed", "CHILD_APP=" + kafkatestName(t, "wcrash"),
		"CHILD_IN=" + in, "CHILD_OUT=" + out, "CHILD_BROKERS=" + brokers(t), "CHILD_STATE=" + t.TempDir(), "CHILD_SELF_KILL=0.05",
		"CHILD_THREADS=" + os.Getenv("CRASH_TEST_THREADS")}
	seed := crashTestSeed(t)
	env = append(env, fmt.Sprintf("CHILD_SEED=%d", seed))
	rng := rand.New(rand.NewPCG(seed, 11))
	byPartition := map[int32][]*kgo.Record{}
	next := 0
	base := time.Now().Add(-time.Hour).UnixMilli()
	produce := func(n int) {
		var recs []*kgo.Record
		for range n {
			k := fmt.Sprintf("sku-%02d", next%8)
			// Time moves 5 ms a record; each is stamped up to 1.5 s behind.
			ts := base + int64(next)*5 - rng.Int64N(1500)
			r := &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(next)),
				Timestamp: time.UnixMilli(ts), Partition: processor.DefaultPartition([]byte(k), 2)}
			recs = append(recs, r)
			byPartition[r.Partition] = append(byPartition[r.Partition], r)
			next++
		}
		kafkatest.Produce(t, recs...)
	}
	const kills = 3
	for round := range kills + 1 {
		childEnv := env
		if round == kills {
			childEnv = append(append([]string(nil), env...), "CHILD_SELF_KILL=0")
		}
		c := killRound(t, childEnv, rng, produce, 300, 2000, round < kills)
		if round < kills {
			continue
		}
		want, late := windowedReference(byPartition)
		if late == 0 {
			t.Fatal("the input has no late record: the test would not tell")
		}
		total := 0
		for _, n := range want {
			total += int(n)
		}
		got := map[windowKey]int64{}
		for _, r := range kafkatest.ConsumeExactly(t, out, total, 2*time.Minute, 2*time.Second) {
			// Kafka Streams' TimeWindowedSerializer: the key, then the start.
			wk := windowKey{string(r.Key[:len(r.Key)-8]), int64(binary.BigEndian.Uint64(r.Key[len(r.Key)-8:]))}
			n := int64(binary.BigEndian.Uint64(r.Value))
			if n != got[wk]+1 {
				t.Fatalf("window %v: count %d after %d: a duplicate, a lost update or a late record counted", wk, n, got[wk])
			}
			got[wk] = n
		}
		for wk, n := range want {
			if got[wk] != n {
				t.Fatalf("window %v: final count %d, want %d", wk, got[wk], n)
			}
		}
		t.Logf("%d records, %d late, %d windows, %d outputs, %d kills", next, late, len(want), total, kills)
		c.terminate(t)
	}
}
