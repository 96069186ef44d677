package soak_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/soak"
)

// The short version of every scenario of the fault campaign (make soak runs
// the full one). Each builds nothing but the service, once per test binary,
// and fails with the checker's report. SOAK_SEED=<n> replays a schedule.

func TestSoakKillCampaign(t *testing.T)   { runShort(t, soak.KillCampaign) }
func TestSoakBrokerKills(t *testing.T)    { runShort(t, soak.BrokerKills) }
func TestSoakRebalanceStorm(t *testing.T) { runShort(t, soak.RebalanceStorm) }
func TestSoakBrokerPause(t *testing.T)    { runShort(t, soak.BrokerPause) }
func TestSoakFreezes(t *testing.T)        { runShort(t, soak.Freezes) }
func TestSoakPartitions(t *testing.T)     { runShort(t, soak.Partitions) }

// The kill campaign again with a standby per task, a shared snapshot store
// and short probing rebalances: the failovers then go through standbys,
// warm-ups and snapshot loads (a wiped instance loads its tasks' snapshots).
func TestSoakKillCampaignWithStandbysAndSnapshots(t *testing.T) {
	runShort(t, soak.KillCampaign, func(o *soak.Options) {
		o.Standbys, o.Snapshots, o.ProbingInterval = 1, true, 15*time.Second
	})
}

var (
	buildOnce sync.Once
	binDir    string
	bin       string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func service(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tidemark-soak-bin-")
		if buildErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			bin, buildErr = soak.BuildService(ctx, binDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

func runShort(t *testing.T, sc soak.Scenario, opts ...func(*soak.Options)) {
	shared := kafkatest.Brokers(t) // skips, or fails under TIDEMARK_REQUIRE_KAFKA, without a broker
	seed := soak.RandomSeed()
	if s := os.Getenv("SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay: SOAK_SEED=%d go test -run '^%s$' ./internal/soak)", seed, seed, t.Name())
	exe := service(t)

	dir, err := os.MkdirTemp("", "tidemark-soak-"+sc.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	logf, done := testLogger(t)
	defer done()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var b soak.Broker = soak.SharedBroker(shared)
	if sc.BrokerFaults {
		b = privateBroker{kafkatest.PrivateBroker(t)}
	}

	o := soak.Options{
		Seed: seed, Short: true, Rate: 300, Keys: 500, Bin: exe, Dir: dir,
		CatchUp: time.Minute, DeleteTopics: !sc.BrokerFaults, Logf: logf,
	}
	for _, opt := range opts {
		opt(&o)
	}
	res, err := soak.RunScenario(ctx, sc, b, o)
	if err != nil {
		t.Fatalf("scenario %s could not run (work directory %s): %v", sc.Name, dir, err)
	}
	summary := soak.Summary([]soak.Result{res})
	if !res.Pass() {
		t.Fatalf("seed %d: exactly-once violated or service unhealthy under %s (work directory kept: %s)\n%s%s", seed, sc.About, dir, summary, res.Details())
	}
	t.Logf("\n%s%s", summary, res.Details())
	os.RemoveAll(dir)
}

// testLogger logs through t until done is called; lines from goroutines
// that outlive the test are dropped rather than panicking.
func testLogger(t *testing.T) (func(string, ...any), func()) {
	var mu sync.Mutex
	open := true
	return func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if open {
				t.Log(fmt.Sprintf(format, args...))
			}
		}, func() {
			mu.Lock()
			open = false
			mu.Unlock()
		}
}

// privateBroker hurts a kafkatest.PrivateBroker; its methods fail the test
// themselves on error.
type privateBroker struct{ p *kafkatest.Private }

func (b privateBroker) Bootstrap() []string           { return b.p.Bootstrap() }
func (b privateBroker) LogFile() string               { return b.p.LogFile() }
func (b privateBroker) Kill() error                   { b.p.Kill(); return nil }
func (b privateBroker) Start(_ context.Context) error { b.p.Start(); return nil }
func (b privateBroker) Pause() error                  { b.p.Pause(); return nil }
func (b privateBroker) Resume() error                 { b.p.Resume(); return nil }
