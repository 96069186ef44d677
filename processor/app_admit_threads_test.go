package processor_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestAdmissionRateIsTheAppsAcrossThreads: tenant hot, limited to 300
// records/s, writes to both input partitions, which two stream threads
// process. The App processes hot's records at ≈ 300/s in all, not 300/s
// per thread, and every partition's records exactly once and in order.
func TestAdmissionRateIsTheAppsAcrossThreads(t *testing.T) {
	const rate, perPart = 300.0, 600
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "admit-threads"))
	var mu sync.Mutex
	var processed []time.Time
	b.Stream(in, serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).
		Peek(func(string, string) {
			mu.Lock()
			processed = append(processed, time.Now())
			mu.Unlock()
		}).
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range perPart {
		for p := range int32(2) {
			recs = append(recs, &kgo.Record{Topic: in, Partition: p, Key: []byte("hot"), Value: []byte(strconv.Itoa(int(p)) + ":" + strconv.Itoa(i))})
		}
	}
	kafkatest.Produce(t, recs...)
	var outMu sync.Mutex
	got := map[string][]int{} // by input partition
	watchOutputs(t, out, func(r *kgo.Record) {
		p, i, _ := strings.Cut(string(r.Value), ":")
		v, _ := strconv.Atoi(i)
		outMu.Lock()
		got[p] = append(got[p], v)
		outMu.Unlock()
	})
	runApp(t, topo, processor.WithThreads(2),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond,
			Tenants: map[string]frontier.TenantOptions{"hot": {Rate: rate}}}))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		outMu.Lock()
		done := len(got["0"]) >= perPart && len(got["1"]) >= perPart
		outMu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d and %d of %d outputs per partition", len(got["0"]), len(got["1"]), perPart)
		}
	}
	outMu.Lock()
	for p, vs := range got {
		for i, v := range vs {
			if v != i {
				t.Fatalf("partition %s: output %d is %d: lost, duplicated or reordered", p, i, v)
			}
		}
	}
	outMu.Unlock()
	mu.Lock()
	ts := slices.Clone(processed)
	mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	// Past the bursts, to the last record.
	const from = 200
	measured := float64(len(ts)-1-from) / ts[len(ts)-1].Sub(ts[from]).Seconds()
	t.Logf("hot: %.0f records/s over both threads (rate %v)", measured, rate)
	if measured > 1.3*rate {
		t.Fatalf("hot processed at %.0f records/s by two threads, want ≈ %v: each thread admitted the tenant's rate", measured, rate)
	}
}
