package processor_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// waitRecordsIn waits until the app has processed n input records.
func waitRecordsIn(t *testing.T, app *processor.App, n float64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if addr := app.HTTPAddr(); addr != "" {
			if got := scrape(t, "http://"+addr)["tidemark_records_in_total"]; got >= n {
				if got > n {
					t.Fatalf("%v input records processed, want %v", got, n)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v input records not processed within 15s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGracefulShutdownCommitsOpenWork stops an app whose commit interval
// has not come yet: cancelling Run commits what it processed, so the next
// run starts where it stopped and reprocesses nothing.
func TestGracefulShutdownCommitsOpenWork(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "stop"), in, out)
	dir := t.TempDir()
	want := produceKeysN(t, in, 0, 200, 10, 2)
	app, stop := runApp(t, topo, processor.WithStateDir(dir), processor.WithHTTP("127.0.0.1:0"), fixedCommits(time.Minute))
	waitRecordsIn(t, app, 200)
	if got := committedOffsets(t, topo.Application(), in); len(got) != 0 {
		t.Fatalf("offsets %v committed before the interval or shutdown", got)
	}
	stop()

	end := endOffsets(t, in)
	if got := committedOffsets(t, topo.Application(), in); got[0] != end[0] || got[1] != end[1] {
		t.Fatalf("after shutdown the group committed %v, want the end offsets %v", got, end)
	}
	checkCounts(t, out, want)

	for k, n := range produceKeysN(t, in, 200, 100, 10, 2) {
		want[k] += n
	}
	again, _ := runApp(t, topo, processor.WithStateDir(dir), processor.WithHTTP("127.0.0.1:0"))
	checkCounts(t, out, want)
	waitRecordsIn(t, again, 100)
}

// TestAtLeastOnceOutputsAreComplete runs the count without transactions:
// every count of every key reaches the output (repeats would be allowed,
// losses are not).
func TestAtLeastOnceOutputsAreComplete(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "alos"), in, out)
	want := produceKeysN(t, in, 0, 300, 10, 2)
	_, stop := runApp(t, topo, processor.WithStateDir(t.TempDir()), processor.WithGuarantee(processor.AtLeastOnce))
	seen := map[string]map[int64]bool{}
	complete := func(rs []*kgo.Record) bool {
		clear(seen)
		for _, r := range rs {
			k := string(r.Key)
			if seen[k] == nil {
				seen[k] = map[int64]bool{}
			}
			seen[k][int64(binary.BigEndian.Uint64(r.Value))] = true
		}
		for k, n := range want {
			for c := int64(1); c <= int64(n); c++ {
				if !seen[k][c] {
					return false
				}
			}
		}
		return true
	}
	recs := kafkatest.ConsumeUntil(t, out, 20*time.Second, complete)
	if len(recs) < 300 {
		t.Fatalf("%d outputs for 300 inputs", len(recs))
	}
	// Stopping commits the offsets of everything processed (the outputs
	// are acknowledged first), so a restart repeats nothing.
	stop()
	end := endOffsets(t, in)
	if got := committedOffsets(t, topo.Application(), in); got[0] != end[0] || got[1] != end[1] {
		t.Fatalf("after shutdown the group committed %v, want the end offsets %v", got, end)
	}
	for k, counts := range seen {
		for c := range counts {
			if c < 1 || c > int64(want[k]) {
				t.Fatalf("key %s: count %d outside 1..%d", k, c, want[k])
			}
		}
	}
}
