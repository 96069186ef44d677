package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// newTenantsCmd is `bench tenants`: the tenant burst measurement of issue
// #15 (bench.RunTenants).
func newTenantsCmd() *cobra.Command {
	var (
		o       bench.TenantOptions
		brokers string
		out     string
	)
	cmd := &cobra.Command{
		Use:   "tenants",
		Short: "Measure per-tenant staleness when one of ten tenants bursts, with isolation off and on",
		Long: `tenants runs a per-key count shared by --tenants tenants at a steady total
--rate, then has the hot tenant burst to --burst-factor × its rate for --burst,
then steady again. An external read_committed consumer measures each tenant's
staleness (receive time − the input's send time, which the output carries).
Each mode runs on a fresh application and topics with the same input, the
modes interleaved: off (default partitioner, fair scheduling off: the runtime
as before tenant isolation), default (the runtime's defaults: fair scheduling
on) and on (the hot tenant on its own input and output partition through the
placement partitioner, fair scheduling, optionally --hot-rate) and apart (the
floor under any isolation within the app: the hot tenant's records over
--hot-rate, or all of them without it, go to a topic the app does not read, so
the app reads what on admits and the rest of the burst loads only the broker,
the producer and the shared cores). It prints and writes, per mode, each
tenant's p99 before and during the burst and its rise, to
internal/bench/results/<time>-tenants/tenants.{json,md} and a copy in
internal/bench/results/tenants-latest/ (not with --out).`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			root, err := testbroker.FindRepoRoot()
			if err != nil {
				return fmt.Errorf("bench tenants needs the tidemark checkout (for the broker and the results directory): %w", err)
			}
			if o.Brokers, err = benchBrokers(ctx, brokers); err != nil {
				return err
			}
			dirs := resultsDirs(root, "tenants", out, time.Now())
			rep, err := bench.RunTenants(ctx, o, progress)
			if rep == nil {
				return err
			}
			return writeReport(rep, dirs, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("TIDEMARK_BROKERS"), "seed brokers (default: start or reuse the make kafka-up broker)")
	f.StringVar(&out, "out", "", "results directory (default internal/bench/results/<time>-tenants, copied to tenants-latest; an explicit directory is not copied)")
	f.IntVar(&o.Tenants, "tenants", 0, "tenants sharing the pipeline (default 10)")
	f.StringVar(&o.Hot, "hot", "", "the tenant that bursts (default t00)")
	f.Float64Var(&o.Rate, "rate", 0, "steady input rate of all tenants together, records/s (default 5000)")
	f.Float64Var(&o.BurstFactor, "burst-factor", 0, "the hot tenant's rate multiplier during the burst (default 10)")
	f.DurationVar(&o.Burst, "burst", 0, "burst duration (default 60s, quick 15s)")
	f.DurationVar(&o.Warmup, "warmup", 0, "steady input before the measured window (default 10s, quick 5s)")
	f.DurationVar(&o.FirstWarmup, "first-warmup", 0, "more warm-up for the first run, while a freshly started broker's JVM warms (default 30s, quick 10s)")
	f.DurationVar(&o.Before, "before", 0, "measured steady window before the burst (default 20s, quick 10s)")
	f.DurationVar(&o.After, "after", 0, "steady input after the burst (default 20s, quick 5s)")
	f.Int32Var(&o.Partitions, "partitions", 0, "partitions of the input and output topics (default 6)")
	f.IntVar(&o.Rounds, "rounds", 0, "how many times to run the modes, interleaved (default 1)")
	f.StringSliceVar(&o.Modes, "modes", nil, "modes in order, of off (no isolation), default (the runtime defaults), on, apart (the hot tenant over --hot-rate not read: the floor) (default off,on)")
	f.Float64Var(&o.HotRate, "hot-rate", 0, "with isolation on, also rate-limit the hot tenant at the source, records/s (default: no limit)")
	f.IntVar(&o.Threads, "threads", 0, "stream threads of the application (default: tidemark's); with isolation on the hot partition is pinned to one")
	f.BoolVar(&o.Quick, "quick", false, "shorter phases (about 2 minutes for both modes)")
	return cmd
}
