package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/txn"
)

// The crash tests re-run this test binary as the service process: with
// TIDEMARK_TEST_CHILD set, TestMain runs an App instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("TIDEMARK_TEST_CHILD") != "" {
		os.Exit(runChild())
	}
	defaultParallel()
	os.Exit(m.Run())
}

func runChild() int {
	env := os.Getenv
	build := buildCount
	switch env("CHILD_TOPOLOGY") {
	case "windowed":
		build = buildWindowedCount
	case "cached":
		build = buildCachedCount
	case "join":
		build = buildJoin
	case "tenantcount":
		build = buildTenantCount
	case "ticks":
		build = buildTicks
	}
	topo, err := build(env("CHILD_APP"), env("CHILD_IN"), env("CHILD_OUT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := []processor.Option{
		processor.WithBrokers(env("CHILD_BROKERS")),
		processor.WithStateDir(env("CHILD_STATE")),
		processor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	commit := frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond}
	if env("CHILD_POLICY") == "adaptive" {
		commit = frontier.Options{}
	}
	if rate, err := strconv.ParseFloat(env("CHILD_TENANT_RATE"), 64); err == nil {
		// Admission control: the tenants limitedTenants names (tenant =
		// key under buildTenantCount), each at rate records/s.
		commit.Tenants = map[string]frontier.TenantOptions{}
		for _, tn := range limitedTenants {
			commit.Tenants[tn] = frontier.TenantOptions{Rate: rate, Burst: rate / 10}
		}
	}
	opts = append(opts, processor.WithCommitPolicy(commit))
	// Kill ourselves, now and then, at the most delicate step: after the
	// transaction committed and before local state applied it, and just
	// before EndTxn, with every record of the transaction flushed. The
	// draws come from CHILD_SEED when the parent passes one (its logged
	// seed and the round), so a replay draws the same sequence.
	if p := env("CHILD_SELF_KILL"); p != "" {
		var prob float64
		fmt.Sscan(p, &prob)
		draw := rand.Float64
		if seed, err := strconv.ParseUint(env("CHILD_SEED"), 10, 64); err == nil {
			var mu sync.Mutex // fault hooks run on each thread's commit goroutines
			rng := rand.New(rand.NewPCG(seed, 11))
			draw = func() float64 {
				mu.Lock()
				defer mu.Unlock()
				return rng.Float64()
			}
		}
		opts = append(opts, processor.WithFaultHook(func(pt txn.Point) {
			if prob > 0 && (pt == txn.AfterCommit || pt == txn.BeforeEnd) && draw() < prob {
				fmt.Fprintf(os.Stderr, "child: killing itself at commit point %d\n", pt)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	if n, err := strconv.Atoi(env("CHILD_KILL_AT_COMMIT")); err == nil {
		// Die with the nth transaction open: its changelog and output
		// records flushed, EndTxn never sent.
		commits := 0
		opts = append(opts, processor.WithFaultHook(func(pt txn.Point) {
			if pt == txn.BeforeEnd {
				if commits++; commits == n {
					fmt.Fprintf(os.Stderr, "child: killing itself with transaction %d open\n", n)
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
			}
		}))
	}
	if id := env("CHILD_INSTANCE"); id != "" {
		opts = append(opts, processor.WithInstanceID(id))
	}
	if d, err := time.ParseDuration(env("CHILD_SESSION_TIMEOUT")); err == nil {
		opts = append(opts, func(c *processor.Config) { c.SessionTimeout = d })
	}
	if d, err := time.ParseDuration(env("CHILD_TXN_TIMEOUT")); err == nil {
		opts = append(opts, func(c *processor.Config) { c.TransactionTimeout = d })
	}
	if env("CHILD_PAUSE_BEFORE_END") != "" {
		// Freeze mid-commit, once, with the transaction's records flushed:
		// the parent resumes us after our partitions moved (a zombie).
		var paused bool
		opts = append(opts, processor.WithFaultHook(func(pt txn.Point) {
			if pt == txn.BeforeEnd && !paused {
				paused = true
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			}
		}))
	}
	if v := env("TIDEMARK_TEST_PIPELINED"); v != "" {
		// Inherited from the parent: run every crash test with pipelined
		// commits on (1) or off (0).
		opts = append(opts, processor.WithPipelinedCommits(v == "1"))
	}
	if n, err := strconv.Atoi(env("CHILD_PER_PASS")); err == nil {
		opts = append(opts, processor.WithMaxRecordsPerTaskPass(n))
	}
	if n, err := strconv.Atoi(env("CHILD_THREADS")); err == nil {
		opts = append(opts, processor.WithThreads(n))
	}
	if n, err := strconv.Atoi(env("CHILD_STANDBYS")); err == nil {
		opts = append(opts, processor.WithStandbyReplicas(n))
	}
	if d, err := time.ParseDuration(env("CHILD_PROBE_INTERVAL")); err == nil {
		opts = append(opts, processor.WithProbingRebalanceInterval(d))
	}
	if addr := env("CHILD_HTTP"); addr != "" {
		opts = append(opts, processor.WithHTTP(addr))
	}
	if d, err := time.ParseDuration(env("CHILD_PEER_DEAD_AFTER")); err == nil {
		opts = append(opts, processor.WithPeerDeadAfter(d))
	}
	if g := env("CHILD_GUARANTEE"); g != "" {
		guarantee, err := processor.ParseGuarantee(g)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts = append(opts, processor.WithGuarantee(guarantee))
	}
	app, err := processor.NewApp(topo, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := app.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

func startChild(t *testing.T, env []string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the child unless it already exited, and reaps it.
func (c *child) kill() {
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-c.done
}

// terminate asks the child to stop (SIGTERM) and waits for it.
func (c *child) terminate(t *testing.T) {
	t.Helper()
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("child did not stop on SIGTERM within 30s")
	}
}

// TestExactlyOnceUnderCrashes runs the service as a child process,
// SIGKILLs it at random moments (and lets it kill itself between commit and
// apply) while input keeps arriving, restarts it each time on the same
// state directory, and checks every output against the reference: each
// key's counts are exactly 1..n, with no duplicate and no loss.
//
// CRASH_TEST_THREADS runs the child with that many stream threads;
// TestExactlyOnceUnderCrashesWithThreads runs it with two.
func TestExactlyOnceUnderCrashes(t *testing.T) {
	t.Parallel()
	exactlyOnceUnderCrashes(t, crashRun{threads: os.Getenv("CRASH_TEST_THREADS"), partitions: 2})
}

// TestExactlyOnceUnderCrashesWithThreads is TestExactlyOnceUnderCrashes
// with two stream threads over 4 partitions and the adaptive commit
// policy (the others commit every 50 ms): each thread commits its own
// transactions at its own controller's cadence, and a SIGKILL lands while
// either may be mid-commit.
func TestExactlyOnceUnderCrashesWithThreads(t *testing.T) {
	t.Parallel()
	exactlyOnceUnderCrashes(t, crashRun{threads: "2", partitions: 4, policy: "adaptive"})
}

// TestExactlyOnceUnderCrashesWithRecordCache is TestExactlyOnceUnderCrashes
// with the count's record cache on (topology.WithRecordCache): each
// commit carries only each key's latest count, so the check is that every
// key's visible counts only go up, never repeat, and end at the number of
// its inputs. A held update lost in a crash would leave a count short; one
// forwarded from an aborted transaction and again on the redo, a repeat.
func TestExactlyOnceUnderCrashesWithRecordCache(t *testing.T) {
	t.Parallel()
	exactlyOnceUnderCrashes(t, crashRun{partitions: 2, topo: "cached"})
}

// crashRun is a crash test's child: its stream threads ("": the default),
// input partitions, topology ("": the count; see runChild) and commit
// policy ("adaptive", or "": fixed 50 ms).
type crashRun struct {
	threads      string
	partitions   int32
	topo, policy string
}

func exactlyOnceUnderCrashes(t *testing.T, run crashRun) {
	threads, partitions, topo := run.threads, run.partitions, run.topo
	in := kafkatestNewTopic(t, partitions)
	out := kafkatestNewTopic(t, partitions)
	appID := kafkatestName(t, "crash")
	state := t.TempDir()
	env := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_GUARANTEE=" + os.Getenv("CRASH_TEST_GUARANTEE"), "CHILD_APP=" + appID, "CHILD_IN=" + in, "CHILD_OUT=" + out,
		"CHILD_BROKERS=" + brokers(t), "CHILD_STATE=" + state, "CHILD_SELF_KILL=0.05", "CHILD_THREADS=" + threads, "CHILD_TOPOLOGY=" + topo, "CHILD_POLICY=" + run.policy}
	seed := crashTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	want := map[string]int{}
	produced := 0
	const kills = 5
	for round := range kills + 1 {
		childEnv := append(slices.Clone(env), "CHILD_SEED="+strconv.FormatUint(seed+uint64(round), 10))
		if round == kills {
			// The last run must live to finish the input.
			childEnv = append(childEnv, "CHILD_SELF_KILL=0")
		}
		c := startChild(t, childEnv)
		// Keep input arriving while the child runs, and kill it while it
		// is busy with a burst: mid-transaction.
		for range 3 {
			for k, n := range produceKeysN(t, in, produced, 150, 16, partitions) {
				want[k] += n
			}
			produced += 150
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		}
		if round < kills {
			for k, n := range produceKeysN(t, in, produced, 3000, 16, partitions) {
				want[k] += n
			}
			produced += 3000
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			c.kill()
			continue
		}
		if topo == "cached" {
			checkLatestCounts(t, out, want, fmt.Sprintf("last round, seed %d", seed))
		} else {
			checkCountsByPartition(t, out, want, partitions, fmt.Sprintf("last round, seed %d", seed))
		}
		c.terminate(t)
	}
}

// crashTestSeed is the seed of a crash test's randomness (the parent's
// sleeps and the children's self-kill draws): CRASH_TEST_SEED when set,
// else one from the clock. It is logged, so a failing run can be replayed
// (as far as the broker's and the scheduler's timing let it).
func crashTestSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASH_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CRASH_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: CRASH_TEST_SEED=%d go test -run '^%s$' ./processor)", seed, seed, t.Name())
	return seed
}

// committedPoller reads topic out read_committed from the start: each
// call polls once, appends what it fetched to *got, and reports false once
// ctx is done. A fetch error fails the test.
func committedPoller(t *testing.T, out string, got *[]*kgo.Record) func(context.Context) bool {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	return func(ctx context.Context) bool {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { *got = append(*got, r) })
		if ctx.Err() != nil {
			return false
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		return true
	}
}

// killRound is one round of a crash test: the child started with env gets
// small records, a pause, and, unless it is the last round (kill false),
// a burst and a SIGKILL while it is busy with it: mid-transaction. It
// returns the child, still running after the last round.
func killRound(t *testing.T, env []string, rng *rand.Rand, produce func(int), small, burst int, kill bool) *child {
	t.Helper()
	c := startChild(t, env)
	produce(small)
	time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	if kill {
		produce(burst)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		c.kill()
	}
	return c
}

// checkCountsByPartition is checkCounts for the crash tests' last round
// (what names the check in failures):
// when the outputs do not all show up within a minute, the failure says,
// per partition, how many are visible and how many are expected (the
// count topology writes key k's counts to k's input partition number), so
// a stalled partition or stream thread shows as such.
func checkCountsByPartition(t *testing.T, out string, want map[string]int, partitions int32, what string) {
	t.Helper()
	total := 0
	expected := make([]int, partitions)
	for k, n := range want {
		total += n
		expected[processor.DefaultPartition([]byte(k), partitions)] += n
	}
	var got []*kgo.Record
	poll := committedPoller(t, out, &got)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(got) < total {
		if !poll(ctx) {
			visible := make([]int, partitions)
			for _, r := range got {
				if r.Partition >= 0 && r.Partition < partitions {
					visible[r.Partition]++
				}
			}
			var per strings.Builder
			for p := range partitions {
				mark := ""
				if visible[p] < expected[p] {
					mark = " (short)"
				}
				fmt.Fprintf(&per, "\n  partition %d: %d of %d visible%s", p, visible[p], expected[p], mark)
			}
			t.Fatalf("%s: %d of %d outputs visible after 1m; per partition:%s", what, len(got), total, per.String())
		}
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer qcancel()
	for poll(qctx) {
	}
	if len(got) != total {
		t.Fatalf("%s: want exactly %d outputs, got %d:%s", what, total, len(got), kafkatest.Summary(got[total:], 10))
	}
	checkCountRecords(t, got, want)
}

// checkLatestCounts checks the outputs of a cached count: per key, counts
// that only go up and end at want's (what names the check in failures).
func checkLatestCounts(t *testing.T, out string, want map[string]int, what string) {
	t.Helper()
	done := func(rs []*kgo.Record) bool {
		last := map[string]int64{}
		for _, r := range rs {
			last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		}
		for k, n := range want {
			if last[k] < int64(n) {
				return false
			}
		}
		return true
	}
	recs := kafkatest.ConsumeUntil(t, out, time.Minute, done)
	total := 0
	for _, n := range want {
		total += n
	}
	last := map[string]int64{}
	for _, r := range recs {
		k, n := string(r.Key), int64(binary.BigEndian.Uint64(r.Value))
		if n <= last[k] {
			t.Fatalf("%s: key %s: count %d after %d: a repeat", what, k, n, last[k])
		}
		last[k] = n
	}
	for k, n := range want {
		if last[k] != int64(n) {
			t.Fatalf("%s: key %s: final count %d, want %d", what, k, last[k], n)
		}
	}
	// 16 keys, bursts of thousands of records, commits every 50 ms: a
	// cache that held nothing back would forward one output per input.
	if len(recs) >= total {
		t.Fatalf("%s: %d outputs for %d inputs: the record cache held nothing back", what, len(recs), total)
	}
	t.Logf("%s: %d inputs, %d outputs with the record cache", what, total, len(recs))
}
