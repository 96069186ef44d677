package processor_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func buildCount(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	return b.Build()
}

// buildCachedCount is buildCount with the count's record cache on
// (topology.WithRecordCache): one output per key per commit.
func buildCachedCount(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts"), topology.WithRecordCache(1000)).
		ToStream().To(out)
	return b.Build()
}

func countTopology(t *testing.T, app, in, out string) *topology.Topology {
	t.Helper()
	topo, err := buildCount(app, in, out)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func produceKeys(t *testing.T, topic string, from, n, keys int) map[string]int {
	return produceKeysN(t, topic, from, n, keys, 2)
}

// produceKeysN writes n records over keys keys, each key always to the
// partition the default partitioner gives it among partitions, and returns
// how many each key got.
func produceKeysN(t *testing.T, topic string, from, n, keys int, partitions int32) map[string]int {
	t.Helper()
	ref := map[string]int{}
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("sku-%02d", i%keys)
		ref[k]++
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
			Partition: processor.DefaultPartition([]byte(k), partitions)})
	}
	kafkatest.Produce(t, recs...)
	return ref
}

// runApp runs an App until the returned stop is called.
func runApp(t *testing.T, topo *topology.Topology, opts ...processor.Option) (*processor.App, func()) {
	t.Helper()
	app, err := processor.NewApp(topo, append([]processor.Option{processor.WithBrokers(kafkatest.Brokers(t)...),
		processor.WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("app did not stop within 60s")
		}
	}
	t.Cleanup(stop)
	return app, stop
}

// checkCounts reads the output and asserts each key's counts are exactly
// 1, 2, …, want[key]: one output per input, none repeated, none lost.
func checkCounts(t *testing.T, out string, want map[string]int) {
	t.Helper()
	total := 0
	for _, n := range want {
		total += n
	}
	checkCountRecords(t, kafkatest.ConsumeExactly(t, out, total, time.Minute, 2*time.Second), want)
}

// checkCountRecords checks per-key count outputs: every key's counts go
// 1, 2, … in order, ending at want's count.
func checkCountRecords(t *testing.T, recs []*kgo.Record, want map[string]int) {
	t.Helper()
	next := map[string]int64{}
	for _, r := range recs {
		k := string(r.Key)
		got := int64(binary.BigEndian.Uint64(r.Value))
		if got != next[k]+1 {
			t.Fatalf("key %s: count %d after %d: a duplicate or a lost update", k, got, next[k])
		}
		next[k] = got
	}
	for k, n := range want {
		if next[k] != int64(n) {
			t.Fatalf("key %s: final count %d, want %d", k, next[k], n)
		}
	}
}

func TestAppCountsExactlyOnceAndResumesFromLocalState(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "app")
	topo := countTopology(t, appID, in, out)
	dir := t.TempDir()

	want := produceKeys(t, in, 0, 600, 12)
	app, stop := runApp(t, topo, processor.WithStateDir(dir), processor.WithHTTP("127.0.0.1:0"))
	checkCounts(t, out, want)

	// Interactive query and frontier endpoints report what was committed.
	base := "http://" + app.HTTPAddr()
	var entry struct{ Key, Value, Encoding string }
	getJSON(t, base+"/stores/counts/keys/sku-03", &entry)
	// A count store value is the 8-byte timestamp prefix (stripped by the
	// endpoint) and the big-endian count.
	raw, err := base64.StdEncoding.DecodeString(entry.Value)
	if entry.Encoding != "base64" || err != nil || len(raw) != 8 || int(binary.BigEndian.Uint64(raw)) != want["sku-03"] {
		t.Fatalf("query answer %+v, want the committed count %d of sku-03", entry, want["sku-03"])
	}
	var fr struct {
		Sinks map[string]struct {
			Partitions []struct {
				Offset int64 `json:"offset"`
			} `json:"partitions"`
		} `json:"sinks"`
	}
	getJSON(t, base+"/frontier", &fr)
	var committed int64
	for _, p := range fr.Sinks[out].Partitions {
		committed += p.Offset
	}
	if committed != 600 {
		t.Fatalf("frontier of %s sums to %d offsets, want the 600 outputs: %+v", out, committed, fr)
	}
	stop()

	// A restart resumes from the local state: counts continue.
	more := produceKeys(t, in, 600, 240, 12)
	for k, n := range more {
		want[k] += n
	}
	runApp(t, topo, processor.WithStateDir(dir))
	checkCounts(t, out, want)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	var lastErr error
	for range 50 {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if err := json.Unmarshal(b, v); err != nil {
					t.Fatalf("GET %s: %v: %s", url, err, b)
				}
				return
			}
			lastErr = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		} else {
			lastErr = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, lastErr)
}

func kafkatestNewTopic(t *testing.T, partitions int32) string {
	return kafkatest.NewTopic(t, partitions, nil)
}
func kafkatestName(t *testing.T, prefix string) string { return kafkatest.UniqueName(t, prefix) }
func brokers(t *testing.T) string                      { return kafkatest.Brokers(t)[0] }
