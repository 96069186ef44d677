package processor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// fairRig is a session without a broker: tasks of a one-source topology
// ("in", tenant = the record key), their outputs collected per partition,
// and the fair queues.
type fairRig struct {
	s        *session
	out      map[int32][]string    // values output, by task partition
	arrivals map[int32][]time.Time // the controller's staleness origin of each output
	now      time.Time
}

func newFairRig(t *testing.T, perPass, pollRecords int, partitions int32, commit frontier.Options) *fairRig {
	t.Helper()
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := frontier.NewController(commit)
	if err != nil {
		t.Fatal(err)
	}
	r := &fairRig{out: map[int32][]string{}, arrivals: map[int32][]time.Time{}, now: time.Unix(1_700_000_000, 0)}
	app := &App{topo: topo, metrics: newAppMetrics("app"), log: slog.New(slog.DiscardHandler)}
	app.thm = newThreadMetrics(app.metrics.reg, "app")
	th := &appThread{app: app}
	app.threads = []*appThread{th}
	r.s = &session{app: app, th: th, fair: newFairQueues(perPass, pollRecords),
		tasks: map[topology.TaskID]*liveTask{}, byInput: map[changelog.TopicPartition]*liveTask{},
		ctrl: ctrl, admission: rateLimited(ctrl.Options()), now: func() time.Time { return r.now }}
	r.s.txn = &txnState{}
	r.s.txn.reset()
	for p := range partitions {
		tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: p, Stores: memstore.NewProvider(),
			Output: task.CollectorFunc(func(_ topology.TaskID, rec *topology.OutputRecord) error {
				r.out[p] = append(r.out[p], string(rec.Value))
				r.arrivals[p] = append(r.arrivals[p], r.s.arrival())
				return nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		r.s.tasks[tk.ID()] = &liveTask{task: tk}
	}
	r.s.index()
	return r
}

// feed queues n records of tenant on in/p, values "<p>:<offset>", from
// offset from.
func (r *fairRig) feed(p int32, tenant string, from, n int) {
	var recs []*kgo.Record
	for o := from; o < from+n; o++ {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: p, Offset: int64(o), Key: []byte(tenant),
			Value: []byte(fmt.Sprintf("%d:%d", p, o)), Timestamp: time.UnixMilli(int64(o))})
	}
	r.s.fair.enqueue(topology.TaskID{Partition: p}, changelog.TopicPartition{Topic: "in", Partition: p}, recs, 0, time.Time{})
}

func (r *fairRig) pass(t *testing.T) int {
	t.Helper()
	r.s.releaseHolds(r.now)
	n, err := r.s.processPass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// limitOf is the offset a commit may carry for in/p; -1 for no limit.
func (r *fairRig) limitOf(p int32) int64 {
	if eo, ok := r.s.fair.limit()["in"][p]; ok {
		return eo.Offset
	}
	return -1
}

// checkOffsetOrder: partition p's outputs are exactly offsets 0..n-1, in order.
func (r *fairRig) checkOffsetOrder(t *testing.T, p int32, n int) {
	t.Helper()
	if len(r.out[p]) != n {
		t.Fatalf("partition %d: %d outputs, want %d", p, len(r.out[p]), n)
	}
	for i, v := range r.out[p] {
		if want := fmt.Sprintf("%d:%d", p, i); v != want {
			t.Fatalf("partition %d: output %d is %s, want %s", p, i, v, want)
		}
	}
}

// TestFairPassTakesAtMostNPerTask: a pass processes at most n records of a
// task, the rest stays queued for the next passes, the other task's records
// all go in the first pass, and the offsets a commit may carry stop at the
// queue head.
func TestFairPassTakesAtMostNPerTask(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 500, 1000, 2, frontier.Options{})
	r.feed(0, "hot", 0, 1200)
	r.feed(1, "cold", 0, 3)
	var passes []int
	var limits []int64
	for r.s.fair.queued() > 0 {
		passes = append(passes, r.pass(t))
		limits = append(limits, r.limitOf(0))
		if r.limitOf(1) != -1 {
			t.Fatalf("partition 1 drained, yet limited at %d", r.limitOf(1))
		}
	}
	if fmt.Sprint(passes) != "[503 500 200]" || fmt.Sprint(limits) != "[500 1000 -1]" {
		t.Fatalf("passes processed %v with limits %v, want [503 500 200] and [500 1000 -1]", passes, limits)
	}
	if len(r.out[1]) != 3 {
		t.Fatalf("the cold task's records waited: %v", r.out[1])
	}
	r.checkOffsetOrder(t, 0, 1200)
	r.checkOffsetOrder(t, 1, 3)
}

// TestFairUnlimitedPassTakesEverything: UnlimitedRecordsPerTaskPass is the
// old loop: one pass processes all that was polled.
func TestFairUnlimitedPassTakesEverything(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, UnlimitedRecordsPerTaskPass, 1000, 2, frontier.Options{})
	r.feed(0, "hot", 0, 1200)
	r.feed(1, "cold", 0, 3)
	if n := r.pass(t); n != 1203 || r.s.fair.queued() != 0 {
		t.Fatalf("one pass processed %d, %d left", n, r.s.fair.queued())
	}
}

// TestFairQueuesKeepTimestampOrderAcrossPassesAndPolls: records of a
// multi-input task queued over several polls and taken over several passes
// reach it in the same order as one pass over all of them would give:
// lowest head timestamp first, each partition's own order kept.
func TestFairQueuesKeepTimestampOrderAcrossPassesAndPolls(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	b.Stream("carts", serde.String(), serde.String()).
		Merge(b.Stream("payments", serde.String(), serde.String())).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: 0, Stores: memstore.NewProvider(),
		Output: task.CollectorFunc(func(_ topology.TaskID, r *topology.OutputRecord) error {
			got = append(got, string(r.Value))
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(topic, v string, off, ts int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Value: []byte(v), Offset: off, Timestamp: time.UnixMilli(ts)}
	}
	s := &session{app: &App{metrics: newAppMetrics("app")}, fair: newFairQueues(2, 1), now: time.Now,
		tasks: map[topology.TaskID]*liveTask{tk.ID(): {task: tk}}}
	s.txn = &txnState{}
	s.txn.reset()
	carts, payments := changelog.TopicPartition{Topic: "carts"}, changelog.TopicPartition{Topic: "payments"}
	s.fair.enqueue(tk.ID(), carts, []*kgo.Record{rec("carts", "c1", 0, 10), rec("carts", "c2", 1, 30)}, 0, time.Time{})
	s.fair.enqueue(tk.ID(), payments, []*kgo.Record{rec("payments", "p1", 0, 15)}, 0, time.Time{})
	passes := 0
	for s.fair.queued() > 0 {
		if passes == 1 { // a later poll
			s.fair.enqueue(tk.ID(), carts, []*kgo.Record{rec("carts", "c3", 2, 20)}, 0, time.Time{})
			s.fair.enqueue(tk.ID(), payments, []*kgo.Record{rec("payments", "p2", 1, 25)}, 0, time.Time{})
		}
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		passes++
	}
	// Pass 1: c1 p1; pass 2 (c3, p2 arrived): p2 c2 — c3 (20) stays
	// behind c2 (30); pass 3: c3.
	if want := "[c1 p1 p2 c2 c3]"; fmt.Sprint(got) != want || passes != 3 {
		t.Fatalf("order %v in %d passes, want %s in 3", got, passes, want)
	}
}

// TestFairDiscardAndRevoke: an abort discards every queue (the consumer
// rewinds to the committed offsets), a revocation drops the revoked
// partitions' queues only.
func TestFairDiscardAndRevoke(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 10, 10, 2, frontier.Options{})
	r.feed(0, "a", 0, 50)
	r.feed(1, "b", 0, 50)
	r.pass(t)
	r.s.fair.discard()
	if r.s.fair.queued() != 0 || r.s.runnable() || len(r.s.fair.limit()) != 0 {
		t.Fatalf("after discard: %d queued, limit %v", r.s.fair.queued(), r.s.fair.limit())
	}
	r.feed(0, "a", 10, 40)
	r.feed(1, "b", 10, 40)
	r.s.fair.revoke(map[string][]int32{"in": {1}})
	r.s.fair.dropRevoked()
	if q := r.s.fair.queued(); q != 40 || r.limitOf(1) != -1 || r.limitOf(0) != 10 {
		t.Fatalf("after revoking in/1: %d queued, limits %d %d; want 40 queued, limits 10 and none", q, r.limitOf(0), r.limitOf(1))
	}
	for r.s.fair.queued() > 0 {
		r.pass(t)
	}
	r.checkOffsetOrder(t, 0, 50)
}

// TestFairBoundPausesFetchingUntilDrained: a task whose queue passes the
// bound has its partitions paused; they resume once it drained to half.
func TestFairBoundPausesFetchingUntilDrained(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 1, 2, frontier.Options{}) // bound 20
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	paused := func() string { return fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]) }
	r.feed(0, "a", 0, 21)
	r.feed(1, "b", 0, 3)
	r.s.applyPauses()
	if paused() != "[0]" || metricValue(r.s.app.metrics.fair.paused) != 1 {
		t.Fatalf("queue of 21 > 20: paused %s, want [0]", paused())
	}
	r.pass(t) // 16 left: above half the bound, stays paused
	r.s.applyPauses()
	if paused() != "[0]" {
		t.Fatalf("16 queued: paused %s, want [0]", paused())
	}
	r.pass(t) // 11
	r.pass(t) // 6
	r.pass(t) // 1
	r.s.applyPauses()
	if paused() != "[]" || metricValue(r.s.app.metrics.fair.paused) != 0 {
		t.Fatalf("drained: paused %s, want none", paused())
	}
}

// TestFairByteBoundPausesLargeRecords: a task queuing few but large records
// is paused once their bytes pass queueByteBound, far below the record
// bound, and resumed once they drained to half of it.
func TestFairByteBoundPausesLargeRecords(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 1, 1, 1, frontier.Options{}) // record bound 4
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	r.s.fair.bound = 1000 // the record count stays far below it
	paused := func() string { return fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]) }
	big := bytes.Repeat([]byte("v"), queueByteBound/3+1)
	var recs []*kgo.Record
	for o := range 3 {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: int64(o), Key: []byte("a"), Value: big, Timestamp: time.UnixMilli(int64(o))})
	}
	r.s.fair.enqueue(topology.TaskID{}, changelog.TopicPartition{Topic: "in"}, recs, 0, time.Time{})
	r.s.applyPauses()
	if paused() != "[0]" {
		t.Fatalf("3 records of a third of the byte bound each: paused %s, want [0]", paused())
	}
	r.pass(t) // two records' bytes left: above half the byte bound
	r.s.applyPauses()
	if paused() != "[0]" {
		t.Fatalf("2 large records queued: paused %s, want [0]", paused())
	}
	r.pass(t)
	r.s.applyPauses()
	if paused() != "[]" || r.s.fair.tasks[topology.TaskID{}].bytes != len(big)+1 {
		t.Fatalf("1 large record queued: paused %s, bytes %d; want none, %d", paused(), r.s.fair.tasks[topology.TaskID{}].bytes, len(big)+1)
	}
}

// TestFairDefaultBoundHoldsAFetch: with the default pass and poll sizes, a
// task queues a fetch's worth of small records (1 MiB per partition, about
// 16,000 records of 60 bytes) without pausing, so a backlogged input is not
// paused, dropped and fetched again at every fetch.
func TestFairDefaultBoundHoldsAFetch(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, DefaultMaxRecordsPerTaskPass, 10_000, 1, frontier.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	r.feed(0, "a", 0, 2*16_000)
	r.s.applyPauses()
	if got := fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]); got != "[]" {
		t.Fatalf("two fetches of small records queued: paused %s, want none (bound %d)", got, r.s.fair.bound)
	}
}

// TestAdmissionHoldsATenantsPartitionAtItsRate: a tenant with Rate 10 and
// Burst 2 gets its burst plus one record on credit, then one record per
// 100ms; its partition's records wait in offset order, while the other
// tenant's partition flows; the offsets a commit may carry stop at the
// held partition's head.
func TestAdmissionHoldsATenantsPartitionAtItsRate(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 500, 1000, 2, frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 2}}})
	r.feed(0, "hot", 0, 30)
	r.feed(1, "cold", 0, 30)
	r.pass(t)
	if len(r.out[0]) != 3 || len(r.out[1]) != 30 {
		t.Fatalf("first pass: hot %d (want burst 2 + 1 on credit), cold %d (want 30)", len(r.out[0]), len(r.out[1]))
	}
	if r.limitOf(0) != 3 {
		t.Fatalf("held partition limited at %d, want 3", r.limitOf(0))
	}
	if r.s.runnable() {
		t.Fatal("a held partition's records are runnable")
	}
	if at, ok := r.s.nextRelease(); !ok || at.Sub(r.now) != 100*time.Millisecond {
		t.Fatalf("next release in %v, want 100ms", at.Sub(r.now))
	}
	start := r.now
	for range 20 { // two seconds in 100ms steps
		r.now = r.now.Add(100 * time.Millisecond)
		r.pass(t)
	}
	if got := len(r.out[0]) - 3; got != 20 {
		t.Fatalf("%d hot records in %v at Rate 10, want 20", got, r.now.Sub(start))
	}
	r.checkOffsetOrder(t, 0, 23)
	if th := metricValue(r.s.app.metrics.fair.throttled.WithLabelValues("hot")); th < 1.9 || th > 2.1 {
		t.Fatalf("throttled %.2fs, want ≈2s", th)
	}
}

// A record that waited in a partition admission control held counts, for
// the commit controller, from the hold's release, not from its poll: the
// wait was the tenant's Rate, not the commit cadence, and counted from the
// poll it made every commit look seconds late to the feedback loop. The
// other tenant's records keep their poll time.
func TestThrottledRecordsOriginateAtTheirRelease(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 500, 1000, 2, frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 2}}})
	polled := r.now
	var recs [2][]*kgo.Record
	for p := range int32(2) {
		for o := range int64(30) {
			recs[p] = append(recs[p], &kgo.Record{Topic: "in", Partition: p, Offset: o, Key: []byte([]string{"hot", "cold"}[p]),
				Value: []byte(fmt.Sprintf("%d:%d", p, o)), Timestamp: time.UnixMilli(o)})
		}
		r.s.fair.enqueue(topology.TaskID{Partition: p}, changelog.TopicPartition{Topic: "in", Partition: p}, recs[p], 0, polled)
	}
	r.pass(t) // hot: 2 on the burst, 1 on credit, then held; cold: all 30
	passAt := map[int]time.Time{}
	for range 20 {
		r.now = r.now.Add(100 * time.Millisecond)
		before := len(r.out[0])
		r.pass(t)
		for i := before; i < len(r.out[0]); i++ {
			passAt[i] = r.now
		}
	}
	if len(r.out[0]) != 23 || len(r.arrivals[1]) != 30 {
		t.Fatalf("hot %d outputs (want 23), cold %d (want 30)", len(r.out[0]), len(r.arrivals[1]))
	}
	for i, at := range r.arrivals[0] {
		want := polled
		if i >= 3 {
			want = passAt[i] // released in the pass that processed it
		}
		if !at.Equal(want) {
			t.Errorf("hot output %d: origin %v after the poll, want %v", i, at.Sub(polled), want.Sub(polled))
		}
	}
	for i, at := range r.arrivals[1] {
		if !at.Equal(polled) {
			t.Fatalf("cold output %d: origin %v after the poll, want its poll time", i, at.Sub(polled))
		}
	}
}

// TestMaxRecordsPerTaskPassValidated: NewApp's validation accepts n ≥ 1 and
// UnlimitedRecordsPerTaskPass, and names the field otherwise.
func TestMaxRecordsPerTaskPassValidated(t *testing.T) {
	t.Parallel()
	for n, ok := range map[int]bool{0: true, 1: true, 500: true, UnlimitedRecordsPerTaskPass: true, -2: false} {
		c := Config{Brokers: []string{"x:9092"}}
		WithMaxRecordsPerTaskPass(n)(&c)
		err := c.Validate()
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "MaxRecordsPerTaskPass")) {
			t.Errorf("MaxRecordsPerTaskPass %d: %v", n, err)
		}
	}
	c := Config{}
	c.EnsureDefaults("app")
	if c.MaxRecordsPerTaskPass != DefaultMaxRecordsPerTaskPass {
		t.Errorf("default %d", c.MaxRecordsPerTaskPass)
	}
}

// metricValue reads a gauge's or a counter's value.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}

// TestAdmissionReleasesAHoldWithAnEmptyQueue: a partition held on its last
// queued record (nothing queued) is still looked after by the loop and
// released once the tenant's token is there. The hold itself does not
// pause fetching (pausing at the tenant's rate would make the client drop
// and refetch the partition's records over and over): what arrives
// meanwhile queues, and the queue's bound pauses the partition once full.
func TestAdmissionReleasesAHoldWithAnEmptyQueue(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 5, 1, frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 1}}}) // bound 20
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	paused := func() string { return fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]) }
	r.feed(0, "hot", 0, 2)
	r.pass(t)
	r.s.applyPauses()
	if r.s.fair.queued() != 0 || !r.s.fair.busy() || paused() != "[]" {
		t.Fatalf("held on its last record: queued %d, busy %v, paused %s; want 0, true, []", r.s.fair.queued(), r.s.fair.busy(), paused())
	}
	r.feed(0, "hot", 2, 21) // arrives while held: queued, not processed
	r.pass(t)
	r.s.applyPauses()
	if r.s.fair.queued() != 21 || paused() != "[0]" {
		t.Fatalf("held with 21 queued (bound 20): queued %d, paused %s; want 21, [0]", r.s.fair.queued(), paused())
	}
	r.now = r.now.Add(100 * time.Millisecond)
	if n := r.pass(t); n != 1 {
		t.Fatalf("after one token's wait: processed %d, want 1 (then held again)", n)
	}
	for range 30 {
		r.now = r.now.Add(100 * time.Millisecond)
		r.pass(t)
	}
	r.s.applyPauses()
	if r.s.fair.queued() != 0 || paused() != "[]" {
		t.Fatalf("after the waits: queued %d, paused %s; want 0, []", r.s.fair.queued(), paused())
	}
	if got := len(r.out[0]); got != 23 {
		t.Fatalf("%d outputs, want 23: none dropped", got)
	}
}

// Without fair scheduling the queues have no bound, so a hold pauses its
// partition at once.
func TestAdmissionHoldPausesWithoutABound(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, UnlimitedRecordsPerTaskPass, 20, 1, frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 1}}})
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	r.feed(0, "hot", 0, 5)
	r.pass(t)
	r.s.applyPauses()
	if got := fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]); got != "[0]" {
		t.Fatalf("held, no bound: paused %s, want [0]", got)
	}
}

// A queued record reports the time of the poll that fetched it, however
// many passes later it is processed: the controller's staleness origin.
func TestQueuedRecordsKeepTheirPollTime(t *testing.T) {
	t.Parallel()
	f := newFairQueues(1, 1)
	tp := changelog.TopicPartition{Topic: "in"}
	t1, t2 := time.Unix(100, 0), time.Unix(200, 0)
	recs := func(offsets ...int64) []*kgo.Record {
		var out []*kgo.Record
		for _, o := range offsets {
			out = append(out, &kgo.Record{Topic: "in", Offset: o})
		}
		return out
	}
	f.enqueue(topology.TaskID{}, tp, recs(0, 1, 2), 0, t1)
	f.enqueue(topology.TaskID{}, tp, recs(3, 4), 0, t2)
	p := f.parts[tp]
	want := []time.Time{t1, t1, t1, t2, t2}
	for i, w := range want {
		if got := p.polledAt(p.head().Offset); !got.Equal(w) {
			t.Fatalf("record %d: polled at %v, want %v", i, got, w)
		}
		f.tasks[topology.TaskID{}].pop(p)
	}
	f.discard()
	if len(p.polls) != 0 {
		t.Fatalf("discard kept %d poll marks", len(p.polls))
	}
}

// The backlog of a partition admission control holds back is left out of
// what the commit controller is told (it waits by choice; counted, it
// would stretch every tenant's commit interval), but stays in the lag
// metrics; a second after its last hold it counts again.
func TestThrottledBacklogIsNotTheControllersBacklog(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 20, 2, frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 1}}})
	r.feed(0, "hot", 0, 12)
	r.feed(1, "cold", 0, 12)
	r.pass(t) // hot: 1 on the burst, 1 on credit, then held; cold: 5
	r.s.observeQueues(r.now)
	if got := r.s.ctrl.Snapshot().Backlog; got != 7 {
		t.Fatalf("controller backlog %d, want cold's 7 queued (hot's 10 are throttled)", got)
	}
	if got := metricValue(r.s.app.metrics.lag); got != 17 {
		t.Fatalf("lag metric %v, want all 17 queued", got)
	}
	r.s.fair.parts[changelog.TopicPartition{Topic: "in", Partition: 0}].hold = admitHold{}
	r.now = r.now.Add(throttledFor)
	r.s.observeQueues(r.now)
	if got := r.s.ctrl.Snapshot().Backlog; got != 17 {
		t.Fatalf("a second after the last hold: controller backlog %d, want 17", got)
	}
}

// TestRevokedAndReturnedPartitionIsNotLeftPaused: a partition paused for
// its task's backlog, revoked, and back on the thread with its task
// running by the time the loop drops the revoked queues (the loop syncs
// tasks after a poll with a transaction open, but drops revoked queues
// only between transactions): dropping its queue also dropped the
// record of why it was paused, and with it the only resume it would get.
// The partition stayed paused for good, its task running and never fed.
func TestRevokedAndReturnedPartitionIsNotLeftPaused(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 1, 2, frontier.Options{}) // bound 20
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	paused := func() string { return fmt.Sprint(cl.PauseFetchPartitions(nil)["in"]) }
	r.feed(0, "a", 0, 21)
	r.s.applyPauses()
	if paused() != "[0]" {
		t.Fatalf("queue of 21 > 20: paused %s, want [0]", paused())
	}
	// The group takes in/0 away and gives it back; the task still runs.
	r.s.fair.revoke(map[string][]int32{"in": {0}})
	r.s.fair.dropRevoked()
	r.s.applyPauses()
	if paused() != "[]" {
		t.Fatalf("in/0's task runs with nothing queued, yet in/0 stays paused: %s", paused())
	}
}

// TestStrayPauseOfARunningPartitionIsLifted: a running task's partition
// that is paused for no reason the loop knows of (neither its backlog nor
// an admission hold) is resumed within pauseSweep, whatever lost track of
// it; a restoring task's partition (not running) stays paused, and so
// does one paused for its backlog.
func TestStrayPauseOfARunningPartitionIsLifted(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 1, 3, frontier.Options{}) // bound 20
	var buf testlog.Buffer
	r.s.app.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	paused := func() string {
		ps := cl.PauseFetchPartitions(nil)["in"]
		slices.Sort(ps)
		return fmt.Sprint(ps)
	}
	r.s.applyPauses()                                // the first sweep
	delete(r.s.tasks, topology.TaskID{Partition: 2}) // in/2's task restores
	r.s.index()
	r.feed(1, "b", 0, 21)
	cl.PauseFetchPartitions(map[string][]int32{"in": {0, 2}}) // a lost resume of in/0; in/2 restoring
	r.s.applyPauses()
	if paused() != "[0 1 2]" {
		t.Fatalf("before the sweep: paused %s, want [0 1 2]", paused())
	}
	r.now = r.now.Add(pauseSweep)
	r.s.applyPauses()
	if paused() != "[1 2]" {
		t.Fatalf("after the sweep: paused %s, want [1 2] (in/1 for its backlog, in/2 restoring)", paused())
	}
	if got := buf.String(); strings.Count(got, "paused for no reason") != 1 || !strings.Contains(got, "partitions=[in/0]") {
		t.Fatalf("want one warning naming in/0:\n%s", got)
	}
	// in/1 drains and resumes as its backlog goes, on a sweep too: not a
	// stray.
	for r.s.fair.queued() > 0 {
		r.pass(t)
	}
	r.now = r.now.Add(pauseSweep)
	r.s.applyPauses()
	if paused() != "[2]" {
		t.Fatalf("drained: paused %s, want [2]", paused())
	}
	if got := buf.String(); strings.Count(got, "paused for no reason") != 1 {
		t.Fatalf("a backlog resume was taken for a stray:\n%s", got)
	}
}

// TestPausedPartitionsGaugeSumsThreads: tidemark_paused_partitions is the
// App's, the partitions every stream thread paused: a thread with none
// paused does not overwrite a sibling's count.
func TestPausedPartitionsGaugeSumsThreads(t *testing.T) {
	t.Parallel()
	r0 := newFairRig(t, 5, 1, 2, frontier.Options{}) // bound 20
	r1 := newFairRig(t, 5, 1, 2, frontier.Options{})
	app := r0.s.app
	th1 := &appThread{app: app, index: 1}
	app.threads = append(app.threads, th1)
	r1.s.app, r1.s.th = app, th1
	for _, r := range []*fairRig{r0, r1} {
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r.s.cl = cl
	}
	r0.feed(0, "a", 0, 21)
	r0.s.applyPauses()
	r1.s.applyPauses() // its first sweep, nothing paused
	if got := metricValue(app.metrics.fair.paused); got != 1 {
		t.Fatalf("thread 0 paused in/0, thread 1 nothing: tidemark_paused_partitions %v, want 1", got)
	}
}
