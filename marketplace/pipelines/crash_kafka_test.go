package pipelines_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// The SIGKILL tests re-run this test binary as the service process: with
// TIDEMARK_TEST_CHILD set, TestMain runs the pipelines in an App instead
// of the tests (as processor/crash_test.go does for single operators).
func TestMain(m *testing.M) {
	if os.Getenv("TIDEMARK_TEST_CHILD") != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild runs the pipelines CHILD_PIPELINES under the JSON config
// CHILD_CONFIG as application CHILD_APP, with its state in CHILD_STATE,
// until SIGTERM: the service with its defaults (instance id kept in the
// state directory, adaptive commits), serving HTTP so that its peers see it
// die. With CHILD_SELF_KILL=p it SIGKILLs itself with probability p at
// each commit's most delicate steps (records flushed but EndTxn not sent;
// committed but not applied locally), drawing from CHILD_SEED.
func runChild() int {
	env := os.Getenv
	var cfg pipelines.Config
	if err := json.Unmarshal([]byte(env("CHILD_CONFIG")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child: config:", err)
		return 1
	}
	topo, err := pipelines.Build(env("CHILD_APP"), strings.Split(env("CHILD_PIPELINES"), ","), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	// CRASH_TEST_LOG=info (inherited from the parent) shows the
	// children's rebalances, restores and commits.
	level := slog.LevelWarn
	if v := env("CRASH_TEST_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintln(os.Stderr, "child: CRASH_TEST_LOG:", err)
			return 1
		}
	}
	opts := []processor.Option{
		processor.WithBrokers(env("CHILD_BROKERS")),
		processor.WithStateDir(env("CHILD_STATE")),
		processor.WithHTTP("127.0.0.1:0"),
		processor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))),
	}
	if v := env("CRASH_TEST_THREADS"); v != "" {
		// Inherited from the parent: the children run that many stream
		// threads, each its own group member and transactional producer.
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: CRASH_TEST_THREADS:", err)
			return 1
		}
		opts = append(opts, processor.WithThreads(n))
	}
	if g := env("CRASH_TEST_GUARANTEE"); g != "" {
		// Inherited from the parent: at_least_once shows what the checks
		// catch when outputs may repeat.
		guarantee, err := processor.ParseGuarantee(g)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: CRASH_TEST_GUARANTEE:", err)
			return 1
		}
		opts = append(opts, processor.WithGuarantee(guarantee))
	}
	var prob float64
	if p := env("CHILD_SELF_KILL"); p != "" {
		if prob, err = strconv.ParseFloat(p, 64); err != nil {
			fmt.Fprintln(os.Stderr, "child: CHILD_SELF_KILL:", err)
			return 1
		}
	}
	if prob > 0 {
		seed, _ := strconv.ParseUint(env("CHILD_SEED"), 10, 64)
		var mu sync.Mutex // fault hooks run on each thread's commit goroutines
		rng := rand.New(rand.NewPCG(seed, 13))
		opts = append(opts, processor.WithFaultHook(func(pt txn.Point) {
			mu.Lock()
			kill := (pt == txn.AfterCommit || pt == txn.BeforeEnd) && rng.Float64() < prob
			mu.Unlock()
			if kill {
				fmt.Fprintf(os.Stderr, "child %d: killing itself at commit point %d\n", os.Getpid(), pt)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}))
	}
	app, err := processor.NewApp(topo, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
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

// child is a service process crashCampaign started.
type child struct {
	cmd     *exec.Cmd
	dir     string        // its state directory
	started time.Time     // when it was started
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // its exit, once done is closed
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

// killAlive is kill for a child that must still be running, or have
// killed itself (SIGKILL): one that exited otherwise, e.g. Run returned
// an error after a restart, fails the test.
func (c *child) killAlive(t *testing.T) {
	t.Helper()
	if c.exited() {
		var exit *exec.ExitError
		if errors.As(c.err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return
			}
		}
		t.Errorf("child %d exited by itself: %v", c.cmd.Process.Pid, c.err)
		return
	}
	c.kill()
}

// terminate stops the child with SIGTERM and fails the test unless it
// exits cleanly within 30 s.
func (c *child) terminate(t *testing.T) {
	t.Helper()
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("child %d: %v", c.cmd.Process.Pid, c.err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("child %d did not stop on SIGTERM within 30s", c.cmd.Process.Pid)
		c.kill()
	}
}

// crashCampaign runs topo (the pipelines names under cfg) in child
// processes and SIGKILLs them while they work through recs, then runs one
// last child to the end of the input and returns it running, with every
// input consumed. Seeded by seed:
//
//   - the input goes in kills+1 chunks, one a round; a chunk goes in
//     before its round's child starts, or, when live, half before and half
//     while the child runs;
//   - each round but the last kills its child a random moment (under
//     300 ms) after the broker lists its transaction as open, and its
//     child may kill itself at a commit's delicate steps;
//   - a round's child runs on the state directory of the round before or
//     on a fresh one (restoring from the changelogs); at least one of
//     each, and one round runs two children at once, the second joining
//     (a rebalance) while the first has transactions open.
func crashCampaign(t *testing.T, topo *topology.Topology, names []string, cfg pipelines.Config, recs []*kgo.Record,
	seed uint64, kills int, live bool) *child {
	t.Helper()
	conf, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	base := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_APP=" + topo.Application(), "CHILD_PIPELINES=" + strings.Join(names, ","),
		"CHILD_CONFIG=" + string(conf), "CHILD_BROKERS=" + strings.Join(kafkatest.Brokers(t), ",")}
	start := func(dir string, round int, selfKill bool) *child {
		env := append(append([]string(nil), base...), "CHILD_STATE="+dir,
			"CHILD_SEED="+strconv.FormatUint(seed+uint64(round), 10))
		if selfKill {
			env = append(env, "CHILD_SELF_KILL=0.05")
		}
		started := time.Now()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd, dir: dir, started: started, done: make(chan struct{})}
		go func() {
			c.err = cmd.Wait()
			close(c.done)
		}()
		t.Cleanup(c.kill)
		return c
	}
	// The plan: round 0 starts on a fresh directory; of the later killed
	// rounds one reuses the directory, one starts fresh, one runs two
	// children, and the rest draw.
	modes := []string{"same", "fresh", "two"}
	for len(modes) < kills-1 {
		modes = append(modes, []string{"same", "fresh"}[rng.IntN(2)])
	}
	rng.Shuffle(len(modes), func(i, j int) { modes[i], modes[j] = modes[j], modes[i] })
	modes = append([]string{"fresh"}, modes...)
	modes = append(modes, []string{"same", "fresh"}[rng.IntN(2)])

	chunk := len(recs) / (kills + 1)
	dir := ""
	midTxn := 0 // rounds whose kills caught a transaction open
	began := time.Now()
	for round, mode := range modes {
		in := recs[round*chunk:]
		if round < kills {
			in = in[:chunk]
		}
		if mode != "same" {
			dir = t.TempDir()
		}
		before, during := in, in[len(in):]
		if live {
			before, during = in[:len(in)/2], in[len(in)/2:]
		}
		t.Logf("%s: round %d (%s): %d input records", time.Since(began).Round(time.Millisecond), round, mode, len(in))
		kafkatest.Produce(t, before...)
		last := round == kills
		c := start(dir, round, !last)
		if last {
			kafkatest.Produce(t, during...)
			waitConsumed(t, topo.Application(), topo.SourceTopics())
			t.Logf("%s: all consumed; %d of %d rounds killed a child with its transaction open", time.Since(began).Round(time.Millisecond), midTxn, kills)
			return c
		}
		if live {
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		}
		kafkatest.Produce(t, during...)
		var second *child
		if mode == "two" {
			// A second instance joins while the first is busy: the
			// group rebalances with transactions open. Both die.
			waitOpen(t, topo.Application(), c, 0)
			second = start(t.TempDir(), round+1000, true)
			time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		}
		open := waitOpen(t, topo.Application(), c, time.Duration(rng.IntN(300))*time.Millisecond)
		c.killAlive(t)
		if second != nil {
			if waitOpen(t, topo.Application(), second, time.Duration(rng.IntN(300))*time.Millisecond) {
				open = true
			}
			second.killAlive(t)
		}
		if open {
			midTxn++
		}
	}
	t.Fatal("crashCampaign: no last round")
	return nil
}

// waitOpen waits until the broker describes a transaction of c, begun
// since c started, as ongoing (a transaction its predecessor on the same
// state directory left open has the same transactional id and does not
// count), for at most 10 s, then another delay; it reports whether it saw
// one (c may have killed itself, or have nothing left to do).
func waitOpen(t *testing.T, app string, c *child, delay time.Duration) bool {
	t.Helper()
	adm := kafkatest.Admin(t)
	deadline := time.Now().Add(10 * time.Second)
	for !c.exited() && time.Now().Before(deadline) {
		// The App keeps its instance id in the state directory.
		// Its transactional ids are "<app>/<instance id>", or with
		// threads "<app>/<instance id>-t<i>".
		if id, err := os.ReadFile(filepath.Join(c.dir, "instance-id")); err == nil {
			base := app + "/" + strings.TrimSpace(string(id))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var mine []string
			ls, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
			for txnID := range ls {
				if txnID == base || strings.HasPrefix(txnID, base+"-t") {
					mine = append(mine, txnID)
				}
			}
			var ds kadm.DescribedTransactions
			if err == nil && len(mine) > 0 {
				ds, err = adm.DescribeTransactions(ctx, mine...)
			}
			cancel()
			for _, d := range ds {
				if err == nil && d.Err == nil && d.State == "Ongoing" && d.StartTimestamp >= c.started.UnixMilli() {
					time.Sleep(delay)
					return true
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// crashKills is how many rounds of a SIGKILL test kill their children: 5,
// or CRASH_TEST_KILLS (at least 3) for a longer campaign.
func crashKills(t *testing.T) int {
	t.Helper()
	s := os.Getenv("CRASH_TEST_KILLS")
	if s == "" {
		return 5
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 3 {
		t.Fatalf("CRASH_TEST_KILLS=%q: want a number of kills, at least 3", s)
	}
	return n
}

// crashSeed is the seed of a SIGKILL test: CRASH_TEST_SEED when set, else
// one from the clock. It is logged, so a failing run can be replayed (as
// far as the broker's and the scheduler's timing let it).
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASH_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CRASH_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: CRASH_TEST_SEED=%d go test -run '^%s$' ./marketplace/pipelines)", seed, seed, t.Name())
	return seed
}

// The inventory, fraud and orders pipelines in a service process that is
// SIGKILLed again and again mid-transaction (crashCampaign: input arriving
// while it runs, restarts on the same and on fresh state directories, two
// instances rebalancing with transactions open, kills at the commit's
// delicate steps) write every output exactly once: the checks of
// TestPipelinesExactlyOnceAcrossRestartsOnKafka.
func TestPipelinesExactlyOnceUnderSIGKILLOnKafka(t *testing.T) {
	seed := crashSeed(t)
	c := newOnceCase(t, "mktk", 12000)
	names := []string{pipelines.Inventory, pipelines.Fraud, pipelines.Orders}
	last := crashCampaign(t, c.topo, names, c.cfg, c.recs, seed, crashKills(t), true)
	kafkatest.Produce(t, c.markers...)
	c.check(t)
	last.terminate(t)
	if t.Failed() {
		t.Logf("failed with seed %d", seed)
	}
}

// The pricing pipeline (versioned table, as-of and foreign-key joins,
// TTL'd lines, suppress, a global table) SIGKILLed again and again
// mid-transaction writes every output exactly once: the checks of
// TestPricingExactlyOnceAcrossRestartsOnKafka. Each chunk of input goes in
// before its child starts, as in that test: a cart add must not overtake
// the price change before it (the reference prices by what came before).
func TestPricingExactlyOnceUnderSIGKILLOnKafka(t *testing.T) {
	seed := crashSeed(t)
	c := newPricingCase(t, "mktk", 12000)
	last := crashCampaign(t, c.topo, []string{pipelines.Pricing}, c.cfg, c.recs, seed, crashKills(t), false)
	kafkatest.Produce(t, c.flush...)
	c.check(t)
	last.terminate(t)
	if t.Failed() {
		t.Logf("failed with seed %d", seed)
	}
}
