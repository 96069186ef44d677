package processor_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// spin burns about d of CPU: a record that costs real processing time.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// watchOutputs reads topic read_committed in the background and calls
// seen with each record as it becomes visible, until the test ends.
func watchOutputs(t *testing.T, topic string, seen func(*kgo.Record)) {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(seen)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// fairBacklog runs an App with perPass over a 50k-record backlog on input
// partition 0 (each record costing ~80µs: 4 s in all, so that the
// trickle's round trip through a loaded broker is well within half of it)
// and a trickle of records on
// partition 1, produced before the start and then every 20ms while the
// backlog is being processed. It returns how many backlog records were
// still unprocessed when the first trickle output of those produced during
// the backlog became visible to a read_committed reader, after checking
// every input's output is there exactly once. The trickle produced before
// the start does not count: its task can start (and commit) before the
// backlog's does, as tasks become ready independently.
func fairBacklog(t *testing.T, perPass int) int64 {
	const backlog = 50_000
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "fair")
	var processed atomic.Int64 // backlog records processed (including redone ones)
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String()).
		MapValues(func(k, v string) string {
			if k == "hot" {
				spin(80 * time.Microsecond)
				processed.Add(1)
			}
			return v
		}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, backlog+10)
	for i := range backlog {
		recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Key: []byte("hot"), Value: []byte("b" + strconv.Itoa(i))})
	}
	trickle := 0
	for ; trickle < 10; trickle++ {
		recs = append(recs, &kgo.Record{Topic: in, Partition: 1, Key: []byte("cold"), Value: []byte("t" + strconv.Itoa(trickle))})
	}
	kafkatest.Produce(t, recs...)

	var mu sync.Mutex
	got := map[string]int{}
	remaining := int64(-1)
	watchOutputs(t, out, func(r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		got[string(r.Value)]++
		if remaining < 0 && bytes.HasPrefix(r.Value, []byte("t-")) {
			remaining = backlog - processed.Load()
		}
	})
	start := time.Now()
	_, stop := runApp(t, topo, processor.WithMaxRecordsPerTaskPass(perPass),
		// One poll may take the whole backlog: the loop's pass limit, not
		// the fetch size, is what decides.
		// Without a pass limit the backlog is one transaction: on a loaded
		// machine (-race, other tests) it took longer than the default 10 s
		// timeout, the broker aborted it, and the redo did the same, so
		// nothing ever committed ("0 of 50559 outputs after 50s").
		func(c *processor.Config) { c.PollRecords = 100_000; c.TransactionTimeout = time.Minute },
		processor.WithClientOpts(kgo.FetchMaxPartitionBytes(32<<20)),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond}))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == backlog+trickle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d outputs after 90s", n, backlog+trickle)
		}
		<-tick.C
		if p := processed.Load(); p > 0 && p < backlog {
			kafkatest.Produce(t, &kgo.Record{Topic: in, Partition: 1, Key: []byte("cold"), Value: []byte("t-" + strconv.Itoa(trickle))})
			trickle++
		}
	}
	stop()
	time.Sleep(200 * time.Millisecond) // duplicates, if any, would show by now
	mu.Lock()
	defer mu.Unlock()
	for v, n := range got {
		if n != 1 {
			t.Fatalf("output %s seen %d times", v, n)
		}
	}
	if len(got) != backlog+trickle {
		t.Fatalf("%d distinct outputs, want %d", len(got), backlog+trickle)
	}
	if remaining < 0 {
		t.Fatalf("no trickle record was produced while the backlog was processed (%d trickle records in all)", trickle)
	}
	t.Logf("pass limit %d: first trickle output visible with %d of %d backlog records left; all done in %v",
		perPass, remaining, backlog, time.Since(start).Round(time.Millisecond))
	return remaining
}

// TestFairSchedulingTrickleVisibleDuringBacklog: with fair scheduling, a
// task's 50k-record backlog does not hold back another task's outputs:
// the trickle's first output commits while most of the backlog is still
// to do.
func TestFairSchedulingTrickleVisibleDuringBacklog(t *testing.T) {
	if left := fairBacklog(t, processor.DefaultMaxRecordsPerTaskPass); left < 25_000 {
		t.Fatalf("the first trickle output became visible with only %d backlog records left, want > 25000: the backlog held it back", left)
	}
}

// TestUnfairSchedulingTrickleWaitsForBacklog is the contrast (and the proof
// that the test above can fail): without a pass limit, the poll that took
// the backlog is processed whole before anything commits, so the trickle
// becomes visible only once the backlog is (nearly) done.
func TestUnfairSchedulingTrickleWaitsForBacklog(t *testing.T) {
	if left := fairBacklog(t, processor.UnlimitedRecordsPerTaskPass); left >= 25_000 {
		t.Fatalf("without a pass limit the trickle was visible with %d backlog records left: the contrast does not show", left)
	}
}

// TestFairQueuesExactlyOnceAcrossRedo: with a tiny pass limit (records
// queued at every commit), records whose processing fails are skipped by
// redoing the transaction (an abort that rewinds the consumer and discards
// the queues); every other input's output is committed exactly once, in
// offset order, also across a restart on a fresh state directory.
func TestFairQueuesExactlyOnceAcrossRedo(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "fair-redo")
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String()).
		MapValues(func(_, v string) string {
			if n, _ := strconv.Atoi(v[strings.IndexByte(v, ':')+1:]); n%97 == 13 {
				panic("poison " + v)
			}
			return v
		}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			p := int32(i % 2)
			recs = append(recs, &kgo.Record{Topic: in, Partition: p, Key: []byte(fmt.Sprint("p", p)), Value: []byte(fmt.Sprintf("%d:%d", p, i))})
		}
		kafkatest.Produce(t, recs...)
	}
	wanted := func(to int) int {
		n := 0
		for i := range to {
			if i%97 != 13 {
				n++
			}
		}
		return n
	}
	opts := []processor.Option{processor.WithMaxRecordsPerTaskPass(7), processor.WithProcessingErrorHandler(processor.ContinueOnError),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 20 * time.Millisecond})}
	produce(0, 3000)
	_, stop := runApp(t, topo, opts...)
	kafkatest.ConsumeUntil(t, out, 60*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= wanted(3000) })
	stop()
	produce(3000, 6000)
	_, stop = runApp(t, topo, opts...) // a fresh state directory
	recs := kafkatest.ConsumeExactly(t, out, wanted(6000), 60*time.Second, 2*time.Second)
	stop()
	last := map[string]int{"0": -2, "1": -1}
	for _, r := range recs {
		p, nstr, _ := strings.Cut(string(r.Value), ":")
		n, _ := strconv.Atoi(nstr)
		if n%97 == 13 {
			t.Fatalf("poison record %s was output", r.Value)
		}
		next := last[p] + 2
		for next%97 == 13 {
			next += 2
		}
		if n != next {
			t.Fatalf("partition %s: output %d after %d, want %d (lost, duplicated or reordered)", p, n, last[p], next)
		}
		last[p] = n
	}
}

// TestAdmissionThrottlesATenantToItsRate: tenant hot (input partition 0)
// has Rate 300/s; cold (partition 1) has none. hot's records are processed
// at ≈ 300/s, none dropped or reordered, its partition's fetching paused
// once its held queue fills (its bound); cold's all commit within the first
// seconds.
func TestAdmissionThrottlesATenantToItsRate(t *testing.T) {
	const rate, n = 300.0, 1500
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "admit")
	b := topology.NewBuilder(appID)
	// When each hot record was processed (the last time, should a redo
	// process it again): the rate the throttle controls, unaffected by
	// how late the test's own consumer sees the outputs.
	var procMu sync.Mutex
	hotProcessed := make([]time.Time, n)
	b.Stream(in, serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).
		Peek(func(k, v string) {
			if i, err := strconv.Atoi(v); err == nil && k == "hot" && i < n {
				procMu.Lock()
				hotProcessed[i] = time.Now()
				procMu.Unlock()
			}
		}).
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs,
			&kgo.Record{Topic: in, Partition: 0, Key: []byte("hot"), Value: []byte(strconv.Itoa(i))},
			&kgo.Record{Topic: in, Partition: 1, Key: []byte("cold"), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, recs...)

	var mu sync.Mutex
	got := map[string][]int{}
	hotWhenColdDone := -1 // hot outputs visible when cold's last became visible
	watchOutputs(t, out, func(r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		v, _ := strconv.Atoi(string(r.Value))
		got[string(r.Key)] = append(got[string(r.Key)], v)
		if string(r.Key) == "cold" && len(got["cold"]) == n {
			hotWhenColdDone = len(got["hot"])
		}
	})
	// Small polls and passes make the held partition's queue bound
	// (max(4 passes, one poll) = 200 records) smaller than its backlog, so
	// its fetching must pause while it waits for tokens.
	app, stop := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"),
		processor.WithMaxRecordsPerTaskPass(50), func(c *processor.Config) { c.PollRecords = 200 },
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond,
			Tenants: map[string]frontier.TenantOptions{"hot": {Rate: rate}}}))
	start := time.Now()
	var pausedSeen bool
	for deadline := start.Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if !pausedSeen {
			pausedSeen = metric(t, app, "tidemark_paused_partitions") > 0
		}
		mu.Lock()
		done := len(got["hot"]) >= n && len(got["cold"]) >= n
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40s: hot %d, cold %d of %d", len(got["hot"]), len(got["cold"]), n)
		}
	}
	throttled := metric(t, app, `tidemark_tenant_throttled_seconds_total{app="`+appID+`",tenant="hot"}`)
	stop()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for tenant, vs := range got {
		for i, v := range vs {
			if v != i {
				t.Fatalf("tenant %s: output %d is %d: lost, duplicated or reordered", tenant, i, v)
			}
		}
		if len(vs) != n {
			t.Fatalf("tenant %s: %d outputs, want %d", tenant, len(vs), n)
		}
	}
	// The rate over the bulk of the run: from the 300th processed hot
	// record (past the burst) to the last.
	procMu.Lock()
	first, last := hotProcessed[300], hotProcessed[n-1]
	procMu.Unlock()
	measured := float64(n-1-300) / last.Sub(first).Seconds()
	t.Logf("hot: %.0f records/s over %v (rate %v); %d hot outputs visible when cold was done; hot throttled %.1fs; paused seen %v",
		measured, last.Sub(first).Round(time.Millisecond), rate, hotWhenColdDone, throttled, pausedSeen)
	if measured > 1.3*rate || measured < 0.5*rate {
		t.Fatalf("hot processed at %.0f records/s, want ≈ %v (≤ 1.3×)", measured, rate)
	}
	// Unthrottled, cold is done within a few commits; hot needs about
	// (n − burst)/rate = 4 s more.
	if hotWhenColdDone < 0 || hotWhenColdDone >= n/2 {
		t.Fatalf("%d of %d hot outputs were visible when cold was done: the throttled tenant held back the other", hotWhenColdDone, n)
	}
	if !pausedSeen || throttled < 1 {
		t.Fatalf("paused partitions seen %v, throttled seconds %.2f: the hot partition was not held", pausedSeen, throttled)
	}
}

// metric reads one sample of the App's /metrics: name, or name{labels}
// exactly as exposed.
func metric(t *testing.T, app *processor.App, sample string) float64 {
	t.Helper()
	resp, err := http.Get(baseURL(t, app) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + `(?:\{[^}]*\})? ([0-9.e+-]+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestFairQueuesExactlyOnceAcrossRebalance: instances with a pass limit of
// 3 (so records are queued at every commit and at every revocation) share
// the input while the group grows, one instance is SIGKILLed mid-stream
// and another stops gracefully; partitions move with records queued, the
// departed member's open transaction is aborted, and every count is still
// exactly 1..n.
func TestFairQueuesExactlyOnceAcrossRebalance(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "fair-rebalance")
	want := map[string]int{}
	produced := 0
	feed := func(n int) {
		for k, c := range produceKeysN(t, in, produced, n, 24, 4) {
			want[k] += c
		}
		produced += n
	}
	a := startChild(t, childEnv(t, appID, in, out, "a", "CHILD_PER_PASS=3"))
	feed(3000)
	time.Sleep(time.Second)
	b := startChild(t, childEnv(t, appID, in, out, "b", "CHILD_PER_PASS=3"))
	feed(3000)
	time.Sleep(time.Second)
	a.kill() // its partitions move after its session times out
	feed(3000)
	c := startChild(t, childEnv(t, appID, in, out, "c", "CHILD_PER_PASS=3"))
	feed(3000)
	time.Sleep(time.Second)
	b.terminate(t) // graceful: b commits what it processed, not what it queued
	feed(3000)
	checkCounts(t, out, want)
	c.terminate(t)
}

// limitedTenants are the tenants (keys) a child with CHILD_TENANT_RATE
// rate-limits.
var limitedTenants = []string{"sku-00", "sku-01", "sku-02", "sku-05", "sku-07", "sku-10"}

// buildTenantCount is buildCount with the key as the record's tenant.
func buildTenantCount(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	return b.Build()
}

// TestAdmissionExactlyOnceAcrossRebalance: instances rate-limit six of 24
// tenants (keys) to 60 records/s each, so their partitions are held, with
// records queued, at every commit, revocation and shutdown; with fair
// scheduling off (holds pause fetching) and on (holds queue). The group
// grows, one instance is SIGKILLed mid-stream and another stops
// gracefully; every count is still exactly 1..n, in order.
func TestAdmissionExactlyOnceAcrossRebalance(t *testing.T) {
	t.Parallel()
	for _, perPass := range []string{"-1", "5"} {
		t.Run("per-pass="+perPass, func(t *testing.T) {
			t.Parallel() // its own topics and application id
			in := kafkatestNewTopic(t, 4)
			out := kafkatestNewTopic(t, 4)
			appID := kafkatestName(t, "admit-rebalance")
			want := map[string]int{}
			produced := 0
			feed := func(n int) {
				for k, c := range produceKeysN(t, in, produced, n, 24, 4) {
					want[k] += c
				}
				produced += n
			}
			env := func(name string) []string {
				return childEnv(t, appID, in, out, name, "CHILD_TOPOLOGY=tenantcount", "CHILD_PER_PASS="+perPass, "CHILD_TENANT_RATE=60")
			}
			a := startChild(t, env("a"))
			feed(2400)
			time.Sleep(time.Second)
			b := startChild(t, env("b"))
			feed(2400)
			time.Sleep(time.Second)
			a.kill()
			feed(2400)
			c := startChild(t, env("c"))
			time.Sleep(time.Second)
			b.terminate(t) // graceful, with held partitions' records queued
			feed(2400)
			checkCounts(t, out, want)
			c.terminate(t)
		})
	}
}
