// Command bench runs tidemark side by side with Kafka Streams and the raw
// limit on a real broker (package bench). It is dev tooling, not part of
// the tidemark CLI: it needs this checkout (the Kafka Streams peer in
// internal/bench/streams, the test broker) and writes its results into it.
//
//	make bench BENCH_ARGS="--quick"
//	go run ./internal/bench/cmd/bench --workloads count --systems tidemark-adaptive,kstreams-100ms
//	go run ./internal/bench/cmd/bench tenants --quick
//	go run ./internal/bench/cmd/bench sweep --quick
//	go run ./internal/bench/cmd/bench parity
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

func main() {
	// The harness re-runs this binary as its worker processes; worker mode
	// exits here, before any command parsing.
	bench.MaybeRunWorker()
	// The first SIGINT or SIGTERM cancels the run (results so far are
	// written); stop restores the default, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := newBenchCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func newBenchCmd() *cobra.Command {
	var (
		brokers, workloads, systems, out string
		quick, resume, sequential        bool
		failover                         bool
		failoverCases                    string
		failoverRate                     float64
		repeats                          int
		records, keys                    int
		sweep, rates                     []float64
		sweepWorkloads                   string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark tidemark side by side with Kafka Streams and the raw limit on a real broker",
		Long: `bench runs every system on the same real broker and the same input, one after
the other: max throughput on pre-produced input, a staleness-vs-rate sweep, and
(with --resume) restart time after SIGKILL. With --failover it measures
instead how fast a second instance takes over the partitions of a SIGKILLed
one (tidemark with a standby, with a snapshot store, with a full changelog
restore; Kafka Streams with and without a standby). It writes results.json, results.md
and staleness SVG plots to --out.

Without --brokers it starts (or reuses) the test broker of 'make kafka-up'.
The Kafka Streams peer in internal/bench/streams is built with Maven on first use.`,
		Args: cobra.NoArgs,
		// main prints the error once.
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			root, err := testbroker.FindRepoRoot()
			if err != nil {
				return fmt.Errorf("bench needs the tidemark checkout (for the broker and internal/bench/streams): %w", err)
			}
			seeds, err := benchBrokers(ctx, brokers)
			if err != nil {
				return err
			}
			if failover {
				return runFailover(ctx, root, out, bench.FailoverOptions{Brokers: seeds, Quick: quick, Keys: keys, Rate: failoverRate, Repeats: repeats}, failoverCases)
			}
			o := bench.Options{Brokers: seeds, Quick: quick, Resume: resume, Records: records, Keys: keys, SweepFractions: sweep, SequentialKeys: sequential, Rates: rates}
			switch sweepWorkloads {
			case "":
			case "none":
				o.SweepWorkloads = []string{}
			default:
				o.SweepWorkloads = strings.Split(sweepWorkloads, ",")
			}
			if workloads != "" {
				o.Workloads = strings.Split(workloads, ",")
			}
			all := append(bench.DefaultSystems(), bench.ExtraSystems()...)
			all = append(all, bench.PipelineSystems()...)
			if systems != "" {
				o.Systems = nil
				for _, name := range strings.Split(systems, ",") {
					s, ok := findSystem(all, name)
					if !ok {
						return fmt.Errorf("--systems: unknown system %q (known: %s)", name, systemNames(all))
					}
					o.Systems = append(o.Systems, s)
				}
			}
			o.Env.StreamsDir = filepath.Join(root, "internal", "bench", "streams")
			if needsStreams(o.Systems, all) {
				if err := buildStreamsPeer(ctx, o.Env.StreamsDir); err != nil {
					return err
				}
			}
			if out == "" {
				out = filepath.Join(root, "internal", "bench", "results", time.Now().UTC().Format("20060102-150405"))
			}
			rep, err := bench.Run(ctx, o, progress)
			if rep == nil {
				return err
			}
			return writeReport(rep, []string{out}, err)
		},
	}
	cmd.AddCommand(newTenantsCmd(), newSweepCmd(), newParityCmd())
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("TIDEMARK_BROKERS"), "seed brokers (default: start or reuse the make kafka-up broker)")
	f.StringVar(&workloads, "workloads", "", "comma-separated subset of "+strings.Join(bench.Workloads, ","))
	f.StringVar(&systems, "systems", "", "comma-separated subset of the systems (default: all)")
	f.StringVar(&out, "out", "", "results directory (default internal/bench/results/<time>; with --failover <time>-failover, copied to failover-latest unless --out is given)")
	f.BoolVar(&quick, "quick", false, "a short run (about 3 minutes)")
	f.BoolVar(&resume, "resume", false, "also measure restart after SIGKILL")
	f.IntVar(&records, "records", 0, "records pre-produced per throughput run (default 300000, quick 100000)")
	f.IntVar(&keys, "keys", 0, "distinct keys, Zipf-skewed (default 10000)")
	f.BoolVar(&sequential, "sequential-keys", false, "pre-produce every key in turn, so --records ≥ --keys fills state with exactly --keys keys")
	f.Float64SliceVar(&sweep, "sweep", nil, "rate sweep as fractions of the slowest system's max throughput (default 0.2,0.5,0.8,1.0; quick 0.5)")
	f.Float64SliceVar(&rates, "rates", nil, "absolute sweep rates in records/s (instead of --sweep fractions)")
	f.BoolVar(&failover, "failover", false, "measure failover instead: SIGKILL the owner of a partition of a 1M-key table (quick: 100k, or --keys) and time the survivor's takeover, tidemark and Kafka Streams with and without standbys, and tidemark's snapshot and full restore at 100k keys too")
	f.StringVar(&failoverCases, "failover-cases", "", "comma-separated failover cases (default: every default case; tidemark-restore-share30 and -share40 only when named)")
	f.Float64Var(&failoverRate, "failover-rate", 0, "input rate during the failover measurement, records/s (default 2000)")
	f.IntVar(&repeats, "repeats", 2, "failover: run every case this many times, interleaved; the table shows min and median")
	f.StringVar(&sweepWorkloads, "sweep-workloads", "", "workloads that get the rate sweep (default count; none to skip it)")
	return cmd
}

// runFailover runs the failover measurement and writes its results
// (resultsDirs: <time>-failover and failover-latest, or out alone).
// cases names the cases to run (default: bench.DefaultFailoverCases);
// bench.ExtraFailoverCases run only when named.
func runFailover(ctx context.Context, root, out string, o bench.FailoverOptions, cases string) error {
	all := bench.DefaultFailoverCases()
	if cases != "" {
		known := append(slices.Clone(all), bench.ExtraFailoverCases()...)
		for _, name := range strings.Split(cases, ",") {
			i := slices.IndexFunc(known, func(c bench.FailoverCase) bool { return c.Name == name })
			if i < 0 {
				var names []string
				for _, c := range known {
					names = append(names, c.Name)
				}
				return fmt.Errorf("--failover-cases: unknown case %q (known: %s)", name, strings.Join(names, ", "))
			}
			o.Cases = append(o.Cases, known[i])
		}
	} else {
		o.Cases = all
	}
	o.Env.StreamsDir = filepath.Join(root, "internal", "bench", "streams")
	if slices.ContainsFunc(o.Cases, func(c bench.FailoverCase) bool { return c.Kind == "kstreams" }) {
		if err := buildStreamsPeer(ctx, o.Env.StreamsDir); err != nil {
			return err
		}
	}
	dirs := resultsDirs(root, "failover", out, time.Now())
	rep, err := bench.RunFailover(ctx, o, progress)
	if rep == nil {
		return err
	}
	return writeReport(rep, dirs, err)
}

func benchBrokers(ctx context.Context, flag string) ([]string, error) {
	if flag != "" {
		return strings.Split(flag, ","), nil
	}
	var cfg testbroker.Config
	if err := cfg.EnsureDefaults(); err != nil {
		return nil, err
	}
	r, err := cfg.Up(ctx, func(s string) { fmt.Fprintln(os.Stderr, "kafka:", s) })
	if err != nil {
		return nil, err
	}
	return []string{r.Bootstrap}, nil
}

func findSystem(all []bench.System, name string) (bench.System, bool) {
	for _, s := range all {
		if s.Name == name {
			return s, true
		}
	}
	return bench.System{}, false
}

func systemNames(all []bench.System) string {
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func needsStreams(chosen, all []bench.System) bool {
	if len(chosen) == 0 {
		chosen = all
	}
	for _, s := range chosen {
		if s.Kind == "kstreams" {
			return true
		}
	}
	return false
}

func buildStreamsPeer(ctx context.Context, dir string) error {
	class, cerr := os.Stat(filepath.Join(dir, "target", "classes", "io", "tidemark", "bench", "Main.class"))
	src, serr := os.Stat(filepath.Join(dir, "src", "main", "java", "io", "tidemark", "bench", "Main.java"))
	if cerr == nil && serr == nil && !src.ModTime().After(class.ModTime()) {
		return nil // built, and not older than its source
	}
	fmt.Fprintln(os.Stderr, "bench: building the Kafka Streams peer with Maven (once)")
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", filepath.Join(dir, "pom.xml"), "package")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: build %s with Maven: %w\n%s", dir, err, out)
	}
	return nil
}
