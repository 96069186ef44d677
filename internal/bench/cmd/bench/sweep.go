package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// newSweepCmd is `bench sweep`: the real-broker freshness sweep of issue
// #12 (bench.RunSweep).
func newSweepCmd() *cobra.Command {
	var (
		o        bench.SweepOptions
		brokers  string
		out      string
		policies string
		recheck  string
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Freshness sweep on the real broker: every commit policy through 10→50→90→50→10% load, with a SIGKILL, against Kafka Streams",
		Long: `sweep is the real-broker counterpart of 'tidemark sim --sweep' (issue #12).

It calibrates capacity first: max throughput with the input produced
concurrently, after a warm-up (so the Kafka Streams JVM is warm), of the count
workload under tidemark-adaptive, Kafka Streams and the raw transactional
limit (2M records each; --count-records), and of the sweep workload (count and
windowed in one application; 500k records, --sweep-records) under
tidemark-adaptive and Kafka Streams, with the runs' external consumer reading
its outputs meanwhile, as in the runs. Then it runs every policy once per --repeats (order rotated per repeat) through the
same input schedule: phases of 10→50→90→50→10% of the sweep workload's
capacity (--phase each, 20s), Zipf 1.2 keys, event times skewed back by up to
5s, 1s tumbling windows with 5s grace, and one SIGKILL + restart of the worker
60% into phase 3 (static membership for every system, so the restarted worker
rejoins at once). Per phase and policy it reports p50/p99 staleness of the
count outputs (receive time at an external read_committed consumer − the
input's produce time), goodput, window close→visible latency, commits/s,
commit latency and CPU per record of the app and of the broker process, then
the issue's targets computed from the measurements: PASS, MISS, or n/a where
they do not apply or a p99 is only a lower bound (inputs whose outputs were not
visible by the end count with the time until then).

Policies: tidemark-adaptive, tidemark-fixed-{10,20,50,100,200}ms,
kstreams-100ms (EOS v2); by name only: tidemark-adaptive-2t (two stream
threads), tidemark-adaptive-nopipe (pipelined commits off),
tidemark-adaptive-cache (the count's record cache on), tidemark-adaptive-cache-2t
(and two stream threads). Results: internal/bench/results/<time>-sweep/
(sweep.json, sweep.md, sweep-*.svg) and a copy in sweep-latest/. The full run
takes 14-16 minutes on 2 cores; --quick about 3 (too short to conclude).
--recheck DIR recomputes the targets of a stored run.

It lives here, not in the tidemark CLI, because it is dev tooling that needs
this checkout: the Kafka Streams peer in internal/bench/streams (built with
Maven on first use), the test broker of 'make kafka-up', and the results
directory it writes into.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recheck != "" {
				rep, err := bench.ReadSweepReport(recheck)
				if err != nil {
					return err
				}
				if err := rep.WriteFiles(recheck); err != nil {
					return err
				}
				rep.Markdown(os.Stdout)
				return nil
			}
			ctx := cmd.Context()
			root, err := testbroker.FindRepoRoot()
			if err != nil {
				return fmt.Errorf("bench sweep needs the tidemark checkout (for the broker, internal/bench/streams and the results directory): %w", err)
			}
			if o.Brokers, err = benchBrokers(ctx, brokers); err != nil {
				return err
			}
			if policies != "" {
				all := append(bench.DefaultSweepPolicies(), bench.ExtraSweepPolicies()...)
				for _, name := range strings.Split(policies, ",") {
					i := slices.IndexFunc(all, func(s bench.System) bool { return s.Name == name })
					if i < 0 {
						return fmt.Errorf("--policies: unknown policy %q (known: %s)", name, systemNames(all))
					}
					o.Policies = append(o.Policies, all[i])
				}
			}
			o.Env.StreamsDir = filepath.Join(root, "internal", "bench", "streams")
			if needsStreams(o.Policies, bench.DefaultSweepPolicies()) {
				if err := buildStreamsPeer(ctx, o.Env.StreamsDir); err != nil {
					return err
				}
			}
			dirs := resultsDirs(root, "sweep", out, time.Now())
			rep, err := bench.RunSweep(ctx, o, progress)
			if rep == nil {
				return err
			}
			return writeReport(rep, dirs, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("TIDEMARK_BROKERS"), "seed brokers (default: start or reuse the make kafka-up broker)")
	f.StringVar(&out, "out", "", "results directory (default internal/bench/results/<time>-sweep, copied to sweep-latest; an explicit directory is not copied)")
	f.StringVar(&policies, "policies", "", "comma-separated subset of the policies (default: all)")
	f.IntVar(&o.Repeats, "repeats", 0, "runs of every policy, interleaved, order rotated per repeat (default 1)")
	f.DurationVar(&o.Phase, "phase", 0, "length of each load phase (default 20s, quick 2s)")
	f.DurationVar(&o.Warmup, "warmup", 0, "unmeasured lead-in at the first phase's load (default 3s, quick 1s)")
	f.DurationVar(&o.FirstWarmup, "first-warmup", 0, "more warm-up for the first run, right after the calibrations (default 20s, quick 0)")
	f.Float64SliceVar(&o.Loads, "loads", nil, "load phases as fractions of the calibrated capacity (default [0.1,0.5,0.9,0.5,0.1])")
	f.BoolVar(&o.NoKill, "no-kill", false, "no SIGKILL + restart in the runs (experiments on steady phases)")
	f.BoolVar(&o.SkipCount, "skip-max-throughput", false, "leave out the count and raw-txn max-throughput calibrations (experiments on the phases only)")
	f.Float64Var(&o.Capacity, "capacity", 0, "the load base in records/s, instead of calibrating the sweep workload")
	f.IntVar(&o.CountRecords, "count-records", 0, "records of each count max-throughput calibration (default 2000000, quick 50000)")
	f.IntVar(&o.SweepRecords, "sweep-records", 0, "records of each sweep-workload calibration (default 500000, quick 50000)")
	f.IntVar(&o.Keys, "keys", 0, "distinct keys, Zipf 1.2 (default 10000)")
	f.Int32Var(&o.Partitions, "partitions", 0, "partitions of every topic (default 4)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of keys and skew (default: the time; logged and in the report)")
	f.IntVar(&o.BrokerPID, "broker-pid", 0, "pid of the broker process for its CPU (default: the process listening on the bootstrap port)")
	f.StringVar(&recheck, "recheck", "", "instead of running, recompute the targets of the sweep stored in this results directory and rewrite its files")
	f.BoolVar(&o.Quick, "quick", false, "a short run (about 3 minutes): phases of 2s, 50k-record calibrations")
	return cmd
}
