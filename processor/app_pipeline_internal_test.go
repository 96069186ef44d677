package processor

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// pipeRig is a counting app over one input partition and one key, whose
// MapValues counts the records the loop processed, so a test can see the
// loop work while a transaction ends.
type pipeRig struct {
	in, out   string
	processed atomic.Int64
	app       *App
	failed    chan string // what a hook on the End goroutine found (fail)
}

func newPipeRig(t *testing.T, n int, opts ...Option) (*pipeRig, func()) {
	t.Helper()
	r := &pipeRig{in: kafkatest.NewTopic(t, 1, nil), out: kafkatest.NewTopic(t, 1, nil), failed: make(chan string, 1)}
	b := topology.NewBuilder(kafkatest.UniqueName(t, "pipe"))
	b.Stream(r.in, serde.String(), serde.String()).
		MapValues(func(_ string, v string) string {
			// Slow enough that commits come while records are queued.
			time.Sleep(100 * time.Microsecond)
			r.processed.Add(1)
			return v
		}).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().To(r.out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: r.in, Partition: 0, Key: []byte("k"), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, recs...)
	app, err := NewApp(topo, append([]Option{WithBrokers(kafkatest.Brokers(t)...), WithStateDir(t.TempDir()),
		WithPipelinedCommits(true),
		// Few records per pass, so that records stay queued for the loop
		// to process while a transaction ends.
		WithMaxRecordsPerTaskPass(5),
		WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 20 * time.Millisecond}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.app = app
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
	return r, stop
}

// waitProcessedBeyond waits until the loop processed more than v records;
// false after 10s.
func (r *pipeRig) waitProcessedBeyond(v int64) bool {
	deadline := time.Now().Add(10 * time.Second)
	for r.processed.Load() <= v {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// fail records a problem a hook found on the End goroutine; finish fails
// the test with the first one.
func (r *pipeRig) fail(format string, args ...any) {
	select {
	case r.failed <- fmt.Sprintf(format, args...):
	default:
	}
}

// waitNextWork, on the End goroutine, waits until the loop has processed
// records of the next transaction (from v0 on), and reports a loop that
// did not.
func (r *pipeRig) waitNextWork() (v0 int64, ok bool) {
	v0 = r.processed.Load()
	if !r.waitProcessedBeyond(v0) {
		r.fail("the loop processed nothing while transaction N was ending (stuck at %d records)", v0)
		return v0, false
	}
	return v0, true
}

// finish checks that every output is committed once, stops the app and
// fails with what a hook reported.
func (r *pipeRig) finish(t *testing.T, n int, stop func()) {
	t.Helper()
	r.checkExactlyOnce(t, n)
	stop()
	select {
	case msg := <-r.failed:
		t.Fatal(msg)
	default:
	}
}

// checkExactlyOnce reads the committed outputs: counts 1..n, each once.
func (r *pipeRig) checkExactlyOnce(t *testing.T, n int) {
	t.Helper()
	recs := kafkatest.ConsumeExactly(t, r.out, n, time.Minute, 2*time.Second)
	for i, rec := range recs {
		if got := binary.BigEndian.Uint64(rec.Value); got != uint64(i+1) {
			t.Fatalf("output %d is count %d: a duplicate or a lost update", i, got)
		}
	}
}

// maxUncommitted is the highest count in the output log, committed or
// not (read_uncommitted): what the app has produced so far.
func maxUncommitted(t *testing.T, topic string) uint64 {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var top uint64
	for quiet := 0; quiet < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			quiet++
		}
		fs.EachRecord(func(rec *kgo.Record) { top = max(top, binary.BigEndian.Uint64(rec.Value)) })
	}
	return top
}

// TestPipelinedCommitProcessesWhileEnding holds the first transaction with
// outputs just before its EndTxn (BeforeEnd runs on the End goroutine)
// until the loop has processed records of the next one: the loop is not
// waiting for it. Meanwhile those records' outputs are not in the output
// log at all (staged, not produced into the ending transaction). In the
// end every output is committed exactly once.
func TestPipelinedCommitProcessesWhileEnding(t *testing.T) {
	t.Parallel()
	const n = 1000
	var rig *pipeRig
	var held atomic.Bool
	hook := func(pt txn.Point) {
		if pt != txn.BeforeEnd || rig == nil || rig.processed.Load() == 0 || !held.CompareAndSwap(false, true) {
			return
		}
		v0, ok := rig.waitNextWork() // v0: N's records and maybe a few of N+1's
		if !ok {
			return
		}
		time.Sleep(200 * time.Millisecond) // time for a produced record to reach the log
		if top := maxUncommitted(t, rig.out); top > uint64(v0) {
			rig.fail("output count %d is in the log while N (at most %d records) ends: N+1's outputs went into N", top, v0)
		}
	}
	var stop func()
	rig, stop = newPipeRig(t, n, WithFaultHook(func(pt txn.Point) { hook(pt) }))
	rig.finish(t, n, stop)
	if !held.Load() {
		t.Fatal("no commit with outputs reached BeforeEnd")
	}
	if c := gathered(t, rig.app, "tidemark_commit_loop_blocked_seconds", ""); c == 0 {
		t.Fatal("tidemark_commit_loop_blocked_seconds observed no commit")
	}
}

// abortingTransactor ends one chosen transaction with an abort, as the
// session does when the group coordinator turned its offsets away: End returns
// committed=false and no error, and kgo rewinds the consumer.
type abortingTransactor struct {
	txn.Transactor
	abort func() bool
}

func (a abortingTransactor) End(ctx context.Context, commit bool, md txn.Metadata) (bool, error) {
	if commit && a.abort() {
		return a.Transactor.End(ctx, false, md)
	}
	return a.Transactor.End(ctx, commit, md)
}

// TestPipelinedAbortDiscardsNextAndRedoes aborts a transaction N while the
// loop has processed records of N+1 (its outputs staged, its state layered
// over N's): N+1 must go with N, everything since the last commit is
// redone, and every output is committed exactly once.
func TestPipelinedAbortDiscardsNextAndRedoes(t *testing.T) {
	t.Parallel()
	const n = 1000
	var rig *pipeRig
	var aborted atomic.Bool
	abort := func() bool {
		if rig == nil || rig.processed.Load() == 0 || !aborted.CompareAndSwap(false, true) {
			return false
		}
		rig.waitNextWork()
		return true
	}
	var stop func()
	rig, stop = newPipeRig(t, n, func(c *Config) {
		c.wrapTransactor = func(tr txn.Transactor) txn.Transactor { return abortingTransactor{tr, abort} }
	})
	rig.finish(t, n, stop)
	if !aborted.Load() {
		t.Fatal("no transaction was aborted")
	}
	if got := gathered(t, rig.app, "tidemark_aborts_total", abortSession); got < 1 {
		t.Fatalf("aborts by the session = %v, want the injected one", got)
	}
	if p := rig.processed.Load(); p <= n {
		t.Fatalf("processed %d records for %d inputs: the aborted work was not redone", p, n)
	}
}

// gathered is a counter's value (the series with label value lv) or a
// histogram's sample count from the app's registry.
func gathered(t *testing.T, a *App, name, lv string) float64 {
	t.Helper()
	mfs, err := a.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			for _, l := range m.GetLabel() {
				if l.GetValue() == lv {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestPipelineBudgetBoundsStaging: with a budget of one byte the loop
// stages one output while a transaction ends, then waits for it instead of
// processing on.
func TestPipelineBudgetBoundsStaging(t *testing.T) {
	t.Parallel()
	const n = 1000
	var rig *pipeRig
	var held atomic.Bool
	hook := func(pt txn.Point) {
		if pt != txn.BeforeEnd || rig == nil || rig.processed.Load() == 0 || !held.CompareAndSwap(false, true) {
			return
		}
		v0 := rig.processed.Load()
		time.Sleep(300 * time.Millisecond)
		if v := rig.processed.Load(); v > v0+1 {
			rig.fail("the loop processed %d records while N ended, past a budget of one output", v-v0)
		}
	}
	var stop func()
	rig, stop = newPipeRig(t, n, WithPipelineBudget(1), WithFaultHook(func(pt txn.Point) { hook(pt) }))
	rig.finish(t, n, stop)
	if !held.Load() {
		t.Fatal("no commit with outputs reached BeforeEnd")
	}
}

// revokeDuringEnd runs n records through a pipe rig and, once, while
// transaction N ends and the loop has processed records of N+1, calls the
// session's revocation callback with each of revs (as the client's group
// callback does). It returns the revoked-cause aborts, after checking that
// every output was committed exactly once.
func revokeDuringEnd(t *testing.T, n int, revs ...map[string][]int32) float64 {
	t.Helper()
	var rig *pipeRig
	var sess atomic.Pointer[session]
	var fired atomic.Bool
	hook := func(pt txn.Point) {
		if pt != txn.BeforeEnd || rig == nil || rig.processed.Load() == 0 || !fired.CompareAndSwap(false, true) {
			return
		}
		rig.waitNextWork()
		for _, rev := range revs {
			sess.Load().onRevoked(context.Background(), nil, rev)
		}
	}
	var stop func()
	rig, stop = newPipeRig(t, n, WithFaultHook(hook), func(c *Config) {
		c.sessionHook = func(s *session) { sess.Store(s) }
	})
	rig.finish(t, n, stop)
	if !fired.Load() {
		t.Fatal("no commit reached BeforeEnd with records processed")
	}
	return gathered(t, rig.app, "tidemark_aborts_total", abortRevoked)
}

// TestRevocationDuringPipelinedEndAbortsTheNext revokes while transaction
// N ends and the loop has processed records of N+1. kgo's session forgets
// a revocation when End returns, so N+1 must be aborted by the session's
// own fence (app_revoke_fence.go), and every output is still committed
// exactly once. The revoked partition is one the session does not own:
// the revocation is what counts, and the rig's one partition stays.
func TestRevocationDuringPipelinedEndAbortsTheNext(t *testing.T) {
	t.Parallel()
	if got := revokeDuringEnd(t, 1000, map[string][]int32{"other-topic": {7}}); got < 1 {
		t.Fatalf("aborts after the revocation = %v, want N+1 aborted", got)
	}
}

// TestEmptyRevocationAbortsNothing: a cooperative rebalance that takes no
// partition from this member (another member left, its partitions move
// here) ends the group session with an empty revocation. The transactions
// of the partitions that stay must commit: aborting them made the survivor
// of a failover redo its own work just as the moved partitions arrived.
func TestEmptyRevocationAbortsNothing(t *testing.T) {
	t.Parallel()
	if got := revokeDuringEnd(t, 1000, map[string][]int32{}, nil); got != 0 {
		t.Fatalf("aborts after empty revocations = %v, want none", got)
	}
}

// TestIdleWaitForEndIsNotCommitCost holds every End that comes after the
// loop has processed all its input for 300 ms. The loop, with nothing
// queued, waits for it: the blocked-time metric counts that wait, but the
// controller's commit cost (Snapshot.Blocked, the last ack's) must not,
// or light load would look like a saturated loop (as it did on the real
// broker: 50% load read as 85–98% utilisation).
func TestIdleWaitForEndIsNotCommitCost(t *testing.T) {
	t.Parallel()
	const n, hold = 200, 300 * time.Millisecond
	var rig *pipeRig
	var held atomic.Int32
	hook := func(pt txn.Point) {
		if pt != txn.BeforeEnd || rig == nil || rig.processed.Load() < n {
			return
		}
		held.Add(1)
		time.Sleep(hold)
	}
	var stop func()
	rig, stop = newPipeRig(t, n, WithFaultHook(func(pt txn.Point) { hook(pt) }))
	rig.checkExactlyOnce(t, n)
	if held.Load() == 0 {
		t.Fatal("no End came after the input was processed")
	}
	snap := rig.app.ControllerSnapshot()
	waited := blockedSum(t, rig.app)
	stop()
	if waited < hold.Seconds()*0.8 {
		t.Fatalf("the loop was blocked %.3fs in all; the test needs it to have waited for a held End (%v)", waited, hold)
	}
	if snap.Blocked >= hold/2 {
		t.Errorf("the last commit cost the controller %v of loop time; its %v wait for End with nothing queued is idle, not cost", snap.Blocked, hold)
	}
}

// blockedSum is the sum of tidemark_commit_loop_blocked_seconds, s.
func blockedSum(t *testing.T, a *App) float64 {
	t.Helper()
	mfs, err := a.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tidemark_commit_loop_blocked_seconds" {
			for _, m := range mf.GetMetric() {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0
}
