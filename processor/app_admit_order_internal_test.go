package processor

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// runMergedWindows runs a task that merges topics a and b into a windowed
// count (10 s windows, no grace) with the given tenant options, feeds it
// hot's records on a (event times 1 s … 1.029 s) and cold's on b (60 s,
// later), and passes the loop for 10 s in 100 ms steps. It returns the
// records the windowed count dropped as late and the final count of hot's
// window.
func runMergedWindows(t *testing.T, tenants map[string]frontier.TenantOptions) (late int, hotCount string) {
	t.Helper()
	s, tk, counts, now := newMergedSession(t, 500, tenants)
	feed := func(topic, key string, ts0 int64, n int) {
		var recs []*kgo.Record
		for o := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Offset: int64(o), Key: []byte(key), Value: []byte("v"),
				Timestamp: time.UnixMilli(ts0 + int64(o))})
		}
		s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: topic, Partition: 0}, recs, 0, *now)
	}
	feed("a", "hot", 1000, 30)
	feed("b", "cold", 60000, 30)
	for range 100 {
		s.releaseHolds(*now)
		if _, err := s.processPass(context.Background()); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(100 * time.Millisecond)
	}
	for _, n := range tk.Metrics().Dropped {
		late += int(n)
	}
	return late, counts["hot@0"]
}

// newMergedSession is a session running one task that merges topics a and
// b (tenant = key) into a windowed count whose outputs land in counts; now
// is its clock.
func newMergedSession(t *testing.T, perPass int, tenants map[string]frontier.TenantOptions) (*session, *task.Task, map[string]string, *time.Time) {
	t.Helper()
	b := topology.NewBuilder("app")
	byKey := topology.WithTenant(func(k, _ string) string { return k })
	sa := b.Stream("a", serde.String(), serde.String(), byKey)
	sb := b.Stream("b", serde.String(), serde.String(), byKey)
	topology.WindowedBy(sa.Merge(sb).GroupByKey(), topology.TumblingWindows(10*time.Second, 0)).
		Count(topology.Named("w")).ToStream().
		SelectKey(func(w topology.Windowed[string], _ int64) string { return fmt.Sprint(w.Key, "@", w.Start) }).
		MapValues(func(_ string, n int64) string { return fmt.Sprint(n) }).
		WithSerdes(serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := frontier.NewController(frontier.Options{Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	app := &App{topo: topo, metrics: newAppMetrics("app"), log: slog.New(slog.DiscardHandler)}
	app.thm = newThreadMetrics(app.metrics.reg, "app")
	th := &appThread{app: app}
	app.threads = []*appThread{th}
	s := &session{app: app, th: th, fair: newFairQueues(perPass, 1000),
		tasks: map[topology.TaskID]*liveTask{}, byInput: map[changelog.TopicPartition]*liveTask{},
		ctrl: ctrl, admission: rateLimited(ctrl.Options()), now: func() time.Time { return now }}
	s.txn = &txnState{}
	s.txn.reset()
	counts := map[string]string{}
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: 0, Stores: memstore.NewProvider(),
		Output: task.CollectorFunc(func(_ topology.TaskID, rec *topology.OutputRecord) error {
			counts[string(rec.Key)] = string(rec.Value)
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	s.tasks[tk.ID()] = &liveTask{task: tk}
	s.index()
	return s, tk, counts, &now
}

// Admission control holds a partition, never reorders what it holds:
// within a task, records are processed in timestamp order across its
// input partitions (as Kafka Streams picks the head with the lowest
// timestamp). A held partition's queued records were skipped over while
// the task's other partitions, with later event times, went on: their
// stream time closed the held records' windows, and the windowed count
// dropped the rate-limited tenant's records as late once released - 27
// of 30 here. Rate-limited, the result must be the unlimited one, only
// later.
func TestAdmissionHoldKeepsATasksTimestampOrder(t *testing.T) {
	t.Parallel()
	late, free := runMergedWindows(t, nil)
	if late != 0 || free != "30" {
		t.Fatalf("unlimited: %d late, hot's window counted %s, want 0 late and 30", late, free)
	}
	late, limited := runMergedWindows(t, map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 2}})
	if late != 0 || limited != free {
		t.Fatalf("hot limited to 10/s: %d of its records dropped as late, its window counted %s; unlimited: 0 and %s", late, limited, free)
	}
}

// Without a bound (fair scheduling off) a hold pauses fetching, or the
// queue would grow without limit; the task now waits for its held
// partition, so its other partitions' queues would grow instead: they
// are paused with it.
func TestAdmissionHoldWithoutABoundPausesTheWholeTask(t *testing.T) {
	t.Parallel()
	s, tk, _, now := newMergedSession(t, UnlimitedRecordsPerTaskPass, map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 1}})
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s.cl = cl
	var recs []*kgo.Record
	for o := range 5 {
		recs = append(recs, &kgo.Record{Topic: "a", Offset: int64(o), Key: []byte("hot"), Value: []byte("v"), Timestamp: time.UnixMilli(int64(o))})
	}
	s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: "a"}, recs, 0, *now)
	s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: "b"}, nil, 0, *now) // fetched: nothing there
	s.releaseHolds(*now)
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.applyPauses()
	if got := fmt.Sprint(cl.PauseFetchPartitions(nil)); got != "map[a:[0] b:[0]]" {
		t.Fatalf("a held, no bound: paused %s, want both of the task's partitions", got)
	}
}

// The backlog of a task waiting for its held partition is the rate's,
// all of it: its other partitions' queues wait for the hold as well, and
// counted as the commit controller's backlog they would stretch every
// tenant's commit interval for a wait no interval changes.
func TestAWaitingTasksBacklogIsNotTheControllers(t *testing.T) {
	t.Parallel()
	s, tk, _, now := newMergedSession(t, 500, map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 1}})
	enq := func(topic, key string, ts0 int64, n int) {
		var recs []*kgo.Record
		for o := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Offset: int64(o), Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ts0 + int64(o))})
		}
		s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: topic}, recs, 0, *now)
	}
	enq("a", "hot", 1000, 10)
	enq("b", "cold", 60000, 10)
	s.releaseHolds(*now)
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.observeQueues(*now)
	if got := s.ctrl.Snapshot().Backlog; got != 0 {
		t.Fatalf("controller backlog %d, want 0: a's 8 are held and b's 10 wait for them", got)
	}
}
