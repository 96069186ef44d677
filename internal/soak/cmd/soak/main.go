// Command soak runs tidemark's fault campaign (make soak): the four
// scenarios of package soak against a private Kafka broker it may kill,
// restart and freeze, and prints one summary line per scenario. It exits 1
// when any scenario fails.
//
//	go run ./internal/soak/cmd/soak                          # the full campaign, ~15 min
//	go run ./internal/soak/cmd/soak --seed 42 --scenarios storm
//	go run ./internal/soak/cmd/soak --short                  # the CI sizes, ~4 min
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tidemark-streams/tidemark/internal/soak"
)

func main() {
	os.Exit(run())
}

func run() int {
	var names []string
	for _, s := range soak.Scenarios {
		names = append(names, s.Name)
	}
	var (
		seed      = flag.Uint64("seed", 0, "campaign seed (0: a random one, logged); each scenario derives its own from it")
		scenarios = flag.String("scenarios", strings.Join(names, ","), "scenarios to run, comma-separated: "+strings.Join(names, ", "))
		scale     = flag.Float64("duration", 1, "scale every phase of the schedules by this factor (fault counts stay)")
		short     = flag.Bool("short", false, "the CI sizes: fewer kills, an 8 s pause")
		keep      = flag.Bool("keep", false, "keep the work directory (state, service logs, broker data) even when everything passes")
		rate      = flag.Int("rate", 400, "input records per second")
		keys      = flag.Int("keys", 2000, "key space (Zipf-distributed)")
		poison    = flag.Float64("poison", 0.005, "fraction of input records that are poison pills")
		catchUp   = flag.Duration("catch-up", 2*time.Minute, "how long to wait for the final counts once input stops")
		guarantee = flag.String("guarantee", "", "the service's guarantee; at_least_once is a negative control that must FAIL")
		dir       = flag.String("dir", "", "work directory (default: a new temporary directory)")
		threads   = flag.Int("threads", 0, "stream threads per service instance (processor.WithThreads); 0: tidemark's default")
		standbys  = flag.Int("standbys", 0, "standby replicas per stateful task of each service instance (processor.WithStandbyReplicas); 0: none")
		snapshots = flag.Bool("snapshots", false, "give the fleet one file:// snapshot store in each scenario's work directory (processor.WithSnapshotStore)")
		probing   = flag.Duration("probing-interval", 0, "the service's probing rebalance interval (processor.WithProbingRebalanceInterval), so warm-ups move tasks within a scenario; 0: tidemark's default (10m)")
		ckptMax   = flag.Duration("checkpoint-max-interval", 0, "cap the service's checkpoint (and snapshot) interval; 0: 5s with --snapshots, else tidemark's default")
		damage    = flag.Float64("damage", soak.DefaultDamage, "chance that the kill campaign damages a killed instance's state before restarting it (a table's bytes flipped, a write-ahead log torn, a MANIFEST garbled, ...), and a third of it that a round removes a running instance's state directory instead of killing one; negative: never")
		sortedMin = flag.Int64("restore-mode-min-offsets", soak.DefaultRestoreModeMinOffsets, "the service's changelog.Options.RestoreModeMinOffsets: restores of at least this many records into an empty task DB are sorted rebuilds; -1: the service's default (100,000)")
	)
	flag.Parse()
	if *seed == 0 {
		*seed = soak.RandomSeed()
	}
	var run []soak.Scenario
	for _, n := range strings.Split(*scenarios, ",") {
		sc, ok := soak.ScenarioByName(strings.TrimSpace(n))
		if !ok {
			fmt.Fprintf(os.Stderr, "soak: --scenarios: unknown scenario %q; want some of %s\n", n, strings.Join(names, ", "))
			return 2
		}
		run = append(run, sc)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	work := *dir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "tidemark-soak-"); err != nil {
			logf("soak: %v", err)
			return 1
		}
	}
	replay := fmt.Sprintf("go run ./internal/soak/cmd/soak --seed %d --scenarios %s", *seed, *scenarios)
	if *short {
		replay += " --short"
	}
	if *scale != 1 {
		replay += fmt.Sprintf(" --duration %g", *scale)
	}
	if *sortedMin != soak.DefaultRestoreModeMinOffsets {
		replay += fmt.Sprintf(" --restore-mode-min-offsets %d", *sortedMin)
	}
	if *guarantee != "" {
		replay += " --guarantee " + *guarantee
	}
	if *threads > 0 {
		replay += fmt.Sprintf(" --threads %d", *threads)
	}
	if *damage != soak.DefaultDamage {
		replay += fmt.Sprintf(" --damage %g", *damage)
	}
	ha := soak.Options{Standbys: *standbys, Snapshots: *snapshots, ProbingInterval: *probing, CheckpointMaxInterval: *ckptMax}
	replay += ha.HAFlags()
	logf("soak: campaign seed %d, scenarios %s, work directory %s (replay: %s)", *seed, *scenarios, work, replay)

	bin, err := soak.BuildService(ctx, work)
	if err != nil {
		logf("%v", err)
		return 1
	}
	logf("soak: starting a private broker in %s", filepath.Join(work, "broker"))
	br, err := soak.StartPrivateBroker(ctx, filepath.Join(work, "broker"), func(s string) { logf("broker: %s", s) })
	if err != nil {
		logf("soak: private broker: %v", err)
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = br.Close(sctx)
	}()
	logf("soak: broker at %s, log %s", br.Bootstrap()[0], br.LogFile())

	var results []soak.Result
	for _, sc := range run {
		res, err := soak.RunScenario(ctx, sc, br, soak.Options{
			Seed: *seed, Short: *short, Scale: *scale, Rate: *rate, Keys: *keys, PoisonFraction: *poison,
			Bin: bin, Dir: work, CatchUp: *catchUp, Guarantee: *guarantee, Threads: *threads, RestoreModeMinOffsets: *sortedMin, Damage: *damage,
			Standbys: *standbys, Snapshots: *snapshots, ProbingInterval: *probing, CheckpointMaxInterval: *ckptMax, Logf: logf,
		})
		if err != nil {
			logf("soak: scenario %s could not run: %v", sc.Name, err)
			res.Failures = append(res.Failures, "could not run: "+err.Error())
		}
		results = append(results, res)
		fmt.Fprint(os.Stderr, res.Details())
		if ctx.Err() != nil {
			break
		}
	}

	failed := false
	for _, r := range results {
		failed = failed || !r.Pass()
	}
	fmt.Println()
	fmt.Printf("soak campaign seed %d (replay: %s)\n", *seed, replay)
	fmt.Print(soak.Summary(results))
	total := soak.Totals(results)
	fmt.Printf("total: %d lost, %d duplicated, %d decreasing, %d repeated, %d gaps; %d SIGKILLs, %d SIGSTOPs, %d partitions, %d broker kills, %d broker pauses, %d crashes; %d sorted restores, %d snapshot loads, %d standby/warm-up starts; %d states damaged, %d moved aside; %d changelog positions checked against the input, %d wrong\n",
		total.Lost, total.Duplicated, total.Decreases, total.Repeats, total.Gaps, total.Kills, total.Freezes, total.Cuts, total.BrokerKills, total.BrokerPauses, total.Crashes, total.SortedRestores, total.SnapshotLoads, total.StandbyStarts, total.Damages, total.MovedAside, total.StatePositions, total.StateWrong)
	if failed {
		fmt.Printf("FAIL; work directory kept: %s (service logs per instance, broker log %s)\n", work, br.LogFile())
		return 1
	}
	fmt.Println("PASS")
	if !*keep && *dir == "" {
		defer os.RemoveAll(work)
	} else {
		fmt.Printf("work directory: %s\n", work)
	}
	return 0
}
