package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Tests of the commit path under broker-side errors, on kfake with
// injected faults: a retriable error is ridden through (never fatal) and
// every input's output is committed exactly once.

type faultRig struct {
	t        *testing.T
	c        *kfake.Cluster
	in, out  string
	parts    int32
	keys     int
	appID    string
	build    func(app, in, out string) (*topology.Topology, error)
	app      *processor.App
	done     <-chan error
	logs     *testlog.Buffer
	want     map[string]int
	produced int
}

func newFaultRig(t *testing.T, opts ...processor.Option) *faultRig {
	t.Helper()
	return newFaultRigTopo(t, buildCount, opts...)
}

// newFaultRigTopo runs the topology build makes, which must count per key
// as buildCount does.
func newFaultRigTopo(t *testing.T, build func(app, in, out string) (*topology.Topology, error), opts ...processor.Option) *faultRig {
	t.Helper()
	r := newFaultCluster(t, 2, build)
	r.app, r.done, _ = r.start(opts...)
	return r
}

// newFaultCluster starts the broker, with input and output topics of
// parts partitions, and no App.
func newFaultCluster(t *testing.T, parts int32, build func(app, in, out string) (*topology.Topology, error)) *faultRig {
	t.Helper()
	r := &faultRig{t: t, in: "in", out: "out", parts: parts, keys: 8, build: build, logs: &testlog.Buffer{}, want: map[string]int{},
		appID: "faults-" + strings.ReplaceAll(t.Name(), "/", "-")}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, r.in, r.out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r.c = c
	return r
}

// start runs an App instance on the rig's broker; stop ends it gracefully.
func (r *faultRig) start(opts ...processor.Option) (app *processor.App, done <-chan error, stop func()) {
	t := r.t
	t.Helper()
	topo, err := r.build(r.appID, r.in, r.out)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	app, err = processor.NewApp(topo, append([]processor.Option{processor.WithBrokers(r.c.ListenAddrs()...),
		processor.WithStateDir(t.TempDir()), processor.WithLogger(log), processor.WithHTTP("127.0.0.1:0"),
		fixedCommits(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		errc <- app.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Errorf("app did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return app, errc, stop
}

func (r *faultRig) client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	return cl
}

// feed produces n more inputs over r.keys keys.
func (r *faultRig) feed(n int) {
	r.t.Helper()
	var recs []*kgo.Record
	for i := r.produced; i < r.produced+n; i++ {
		recs = append(recs, r.input(i, strconv.Itoa(i)))
	}
	r.produced += n
	r.produce(recs...)
}

// feedValue produces one more input with the given value.
func (r *faultRig) feedValue(v string) {
	r.t.Helper()
	r.produce(r.input(r.produced, v))
	r.produced++
}

func (r *faultRig) input(i int, v string) *kgo.Record {
	k := fmt.Sprintf("sku-%02d", i%r.keys)
	r.want[k]++
	return &kgo.Record{Topic: r.in, Key: []byte(k), Value: []byte(v), Partition: processor.DefaultPartition([]byte(k), r.parts)}
}

func (r *faultRig) produce(recs ...*kgo.Record) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// check reads the committed output and asserts every key counts 1, 2, …
// up to what was fed: no duplicate, no loss. The app must not have failed.
func (r *faultRig) check(within time.Duration) {
	r.t.Helper()
	total := 0
	for _, n := range r.want {
		total += n
	}
	cl := r.client(kgo.ConsumeTopics(r.out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var got []*kgo.Record
	for len(got) < total && ctx.Err() == nil {
		select {
		case err := <-r.done:
			r.t.Fatalf("app stopped: %v\nlogs:\n%s", err, r.logs.String())
		default:
		}
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { got = append(got, rec) })
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer qcancel()
	for qctx.Err() == nil {
		cl.PollFetches(qctx).EachRecord(func(rec *kgo.Record) { got = append(got, rec) })
	}
	next := map[string]int64{}
	for _, rec := range got {
		k := string(rec.Key)
		n := int64(binary.BigEndian.Uint64(rec.Value))
		if n != next[k]+1 {
			r.t.Fatalf("key %s: count %d after %d: a duplicate or a lost update\nlogs:\n%s", k, n, next[k], r.logs.String())
		}
		next[k] = n
	}
	for k, n := range r.want {
		if next[k] != int64(n) {
			r.t.Fatalf("key %s: final count %d, want %d (read %d of %d outputs)\nlogs:\n%s", k, next[k], n, len(got), total, r.logs.String())
		}
	}
}

// metric sums the /metrics lines that start with name and contain every
// one of labels.
func (r *faultRig) metric(name string, labels ...string) float64 {
	r.t.Helper()
	return r.metricOf(r.app, name, labels...)
}

func (r *faultRig) metricOf(app *processor.App, name string, labels ...string) float64 {
	r.t.Helper()
	resp, err := http.Get("http://" + app.HTTPAddr() + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
next:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// warmUp waits for the app to commit a first batch, so faults hit a
// running session rather than its start.
func (r *faultRig) warmUp() {
	r.t.Helper()
	r.feed(40)
	r.check(20 * time.Second)
}

// An EndTxn whose outcome the client cannot confirm (here it timed out
// before the broker acted on it) leaves the transaction open broker-side,
// its offsets pending. The commit must learn the outcome at once (franz-go's
// documented heal: end it with TryAbort, which bumps the producer epoch and
// aborts whatever is still open) rather than wait on the stable offsets
// until the broker times the transaction out: all processing stalled for
// the transaction timeout.
func TestUnconfirmedEndTxnDoesNotStallForTheTransactionTimeout(t *testing.T) {
	r := newFaultRig(t, func(c *processor.Config) { c.TransactionTimeout = 20 * time.Second })
	r.warmUp()
	h := r.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true})
	r.feed(40)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hit := time.Now()
	r.feed(40)
	r.check(30 * time.Second)
	if took := time.Since(hit); took > 5*time.Second {
		t.Fatalf("outputs committed %s after the unconfirmed EndTxn (transaction timeout 20s): the commit waited for the broker to time the transaction out\nlogs:\n%s",
			took.Round(100*time.Millisecond), r.logs.String())
	}
}

// kgo's GroupTransactSession remembers a revocation until its next End and
// swallows the revoke callbacks of rebalances before it. An instance with
// nothing to commit (no transaction open) that lost partitions twice never
// heard of the second time: it kept running those tasks next to their new
// owner and, when the partitions came back, resumed them from its stale
// local state instead of restoring what the owner had committed meanwhile.
func TestIdleInstanceHearsEveryRevocation(t *testing.T) {
	t.Parallel()
	r := newFaultCluster(t, 6, buildCount)
	r.keys = 24
	apps := map[string]*processor.App{}
	apps["a"], r.done, _ = r.start(processor.WithInstanceID("a"))
	r.app = apps["a"]
	r.warmUp()
	var stops []func()
	for _, id := range []string{"b", "c"} { // a, idle, hands each its share
		app, _, stop := r.start(processor.WithInstanceID(id))
		apps[id], stops = app, append(stops, stop)
		r.waitTasksMatchAssignment(apps, 20*time.Second)
	}
	r.feed(96)
	r.check(20 * time.Second)
	for _, stop := range stops {
		stop()
	}
	r.feed(96) // a takes every partition back
	r.check(20 * time.Second)
}

// shortCommits commits every 100ms with a longest interval of 500ms, which
// allows a TransactionTimeout down to 5.5s.
var shortCommits = processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 100 * time.Millisecond,
	MinInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond})

// waitTasksMatchAssignment waits until every instance runs one task per
// input partition the group assigned it.
func (r *faultRig) waitTasksMatchAssignment(apps map[string]*processor.App, within time.Duration) {
	r.t.Helper()
	adm := kadm.NewClient(r.client())
	deadline := time.Now().Add(within)
	for {
		var diff []string
		described, err := adm.DescribeGroups(context.Background(), r.appID)
		if err == nil {
			err = described.Error()
		}
		if err != nil {
			diff = append(diff, err.Error())
		} else {
			members := described[r.appID].Members
			if len(members) != len(apps) {
				diff = append(diff, fmt.Sprintf("%d members, want %d", len(members), len(apps)))
			}
			for _, m := range members {
				ca, _ := m.Assigned.AsConsumer()
				n := 0
				for _, t := range ca.Topics {
					if t.Topic == r.in {
						n += len(t.Partitions)
					}
				}
				id := *m.InstanceID
				if got := r.metricOf(apps[id], "tidemark_tasks"); got != float64(n) {
					diff = append(diff, fmt.Sprintf("%s runs %v tasks, assigned %d partitions", id, got, n))
				}
			}
		}
		if len(diff) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after %s: %s\nlogs:\n%s", within, strings.Join(diff, "; "), r.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kgo's session aborts a transaction whose offsets the group coordinator
// turned away with an error it deems abortable (CONCURRENT_TRANSACTIONS
// here; a new generation, a coordinator move) or whose membership it could
// not confirm. The work is redone, and the abort is counted and logged as
// what it was: no partition was revoked.
func TestSessionAbortWithoutRevocationIsNotCountedAsRevoked(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	r.warmUp()
	h := r.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.ConcurrentTransactions, Count: 2})
	r.feed(40)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r.feed(40)
	r.check(20 * time.Second)
	revoked, session := r.metric("tidemark_aborts_total", `cause="revoked"`), r.metric("tidemark_aborts_total", `cause="session"`)
	if revoked != 0 || session != 2 {
		t.Fatalf("aborts by cause: revoked %v, session %v; want 0 and 2 (no partition was revoked)", revoked, session)
	}
	if logs := r.logs.String(); strings.Contains(logs, "partitions revoked") {
		t.Fatalf("an abort logged as a revocation:\n%s", logs)
	}
}

// A user function that blocks the record loop past TransactionTimeout with
// a transaction open: the broker aborts the transaction and bumps the
// producer epoch. The app restarts its session, redoes the work from the
// last commit without duplicates or losses, and says the transaction timed
// out rather than that a newer producer fenced it.
func TestStalledLoopTransactionTimeoutIsRedoneAndNamed(t *testing.T) {
	t.Parallel()
	var once sync.Once
	build := func(app, in, out string) (*topology.Topology, error) {
		b := topology.NewBuilder(app)
		b.Stream(in, serde.String(), serde.String()).
			Peek(func(_ string, v string) {
				if v == "stall" {
					once.Do(func() { time.Sleep(8 * time.Second) })
				}
			}).
			GroupByKey(topology.Named("counts")).
			Count(topology.Named("counts")).
			ToStream().To(out)
		return b.Build()
	}
	r := newFaultRigTopo(t, build, shortCommits, func(c *processor.Config) { c.TransactionTimeout = 6 * time.Second })
	r.warmUp()
	var recs []*kgo.Record // the stall comes after records of its transaction
	for i := range 41 {
		v := strconv.Itoa(r.produced)
		if i == 20 {
			v = "stall"
		}
		recs = append(recs, r.input(r.produced, v))
		r.produced++
	}
	r.produce(recs...)
	r.feed(40)
	r.check(30 * time.Second)
	timedOut, fenced := r.metric("tidemark_session_restarts_total", `cause="transaction_timeout"`), r.metric("tidemark_session_restarts_total", `cause="fenced"`)
	if timedOut != 1 || fenced != 0 {
		t.Fatalf("session restarts: transaction_timeout %v, fenced %v; want 1 and 0\nlogs:\n%s", timedOut, fenced, r.logs.String())
	}
	if logs := r.logs.String(); !strings.Contains(logs, `msg="aborted transaction: it was open past TransactionTimeout`) {
		t.Fatalf("the abort's log does not say the transaction timed out:\n%s", logs)
	}
}

// A commit whose outputs the broker keeps refusing with a retriable error
// (NOT_ENOUGH_REPLICAS while replicas are down) fails its prepare when the
// transaction timeout runs out, and the abort after it has no time left.
// An abort cannot have committed: the session restarts to fence the
// transaction and redoes the work, without reporting a commit of unknown
// outcome.
func TestAbortAfterAStuckPrepareIsNotAnUnknownCommit(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, shortCommits, func(c *processor.Config) { c.TransactionTimeout = 6 * time.Second })
	r.warmUp()
	h := r.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: r.out, Err: kerr.NotEnoughReplicas, Count: -1})
	r.feed(40)
	time.Sleep(7 * time.Second)
	h.Remove()
	r.feed(40)
	r.check(20 * time.Second)
	if n := r.metric("tidemark_session_restarts_total", `cause="outcome_unknown"`); n != 0 {
		t.Fatalf("%v restarts for a commit of unknown outcome; no commit was attempted\nlogs:\n%s", n, r.logs.String())
	}
	if n := r.metric("tidemark_aborts_total", `cause="prepare"`); n < 1 {
		t.Fatalf("%v prepare aborts, want the stuck flush's", n)
	}
}

// kgo's GroupTransactSession calls the revoke callback only for the first
// revocation before its next End: a second one that arrives while the
// first's transaction is still open is swallowed. An instance whose loop
// was busy (a slow record) through two rebalances that each took
// partitions from it kept the tasks of the second, next to their new
// owner.
func TestSecondRevocationBeforeEndIsHeard(t *testing.T) {
	t.Parallel()
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	build := func(app, in, out string) (*topology.Topology, error) {
		b := topology.NewBuilder(app)
		b.Stream(in, serde.String(), serde.String()).
			Peek(func(_ string, v string) {
				if v == "stall" {
					once.Do(func() {
						close(stalled)
						select {
						case <-release:
						case <-time.After(15 * time.Second):
						}
					})
				}
			}).
			GroupByKey(topology.Named("counts")).
			Count(topology.Named("counts")).
			ToStream().To(out)
		return b.Build()
	}
	r := newFaultCluster(t, 6, build)
	r.keys = 24
	opts := []processor.Option{shortCommits, func(c *processor.Config) { c.TransactionTimeout = 30 * time.Second }}
	apps := map[string]*processor.App{}
	apps["a"], r.done, _ = r.start(append(opts, processor.WithInstanceID("a"))...)
	r.app = apps["a"]
	r.warmUp()
	r.feed(5)
	r.feedValue("stall") // a's loop holds a transaction open through both rebalances
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stall record was not processed")
	}
	for _, id := range []string{"b", "c"} {
		apps[id], _, _ = r.start(append(opts, processor.WithInstanceID(id))...)
		r.waitAssigned(id, 20*time.Second)
	}
	close(release)
	r.waitTasksMatchAssignment(apps, 10*time.Second)
	r.feed(96)
	r.check(20 * time.Second)
}

// waitAssigned waits until the group assigns instance id some partitions.
func (r *faultRig) waitAssigned(id string, within time.Duration) {
	r.t.Helper()
	adm := kadm.NewClient(r.client())
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		described, err := adm.DescribeGroups(context.Background(), r.appID)
		if err == nil && described.Error() == nil {
			for _, m := range described[r.appID].Members {
				if ca, _ := m.Assigned.AsConsumer(); m.InstanceID != nil && *m.InstanceID == id && ca != nil && len(ca.Topics) > 0 {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("%s was assigned no partition within %s\nlogs:\n%s", id, within, r.logs.String())
}

// Stale committed offsets (app_reflected.go) and then an abort: the app
// restarts on its state while the group's offsets were rewound to 0, skips
// the inputs its state reflects, and its first commit is turned away. The
// consumer rewinds to the stale offsets again, and the skip must hold again:
// the floor was forgotten once passed, and the redo counted every skipped
// input a second time (make soak's broker-kill scenario: 6,746 counts over
// on 446 keys after a broker restart served offset 0).
func TestStaleOffsetsAndAnAbortDoNotCountInputsTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newFaultCluster(t, 2, buildCount)
	var stop func()
	r.app, r.done, stop = r.start(processor.WithStateDir(dir))
	r.warmUp()
	stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rewind := kadm.Offsets{}
	for p := range r.parts {
		rewind.Add(kadm.Offset{Topic: r.in, Partition: p, At: 0})
	}
	adm := kadm.NewClient(r.client())
	for {
		resp, err := adm.CommitOffsets(ctx, r.appID, rewind)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("rewind the group's offsets: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the stopped member may still be in the group
	}

	h := r.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.ConcurrentTransactions, Count: 1})
	r.feed(40)
	r.app, r.done, _ = r.start(processor.WithStateDir(dir))
	if err := h.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.check(20 * time.Second)
	if n := r.metric("tidemark_reflected_records_skipped_total"); n <= 40 {
		t.Fatalf("tidemark_reflected_records_skipped_total = %v, want the 40 reflected inputs, and those the redo after the abort met again", n)
	}
}
