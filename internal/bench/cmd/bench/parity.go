package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// newParityCmd is `bench parity`: tidemark's results against Kafka
// Streams' on the same input (bench.RunParity).
func newParityCmd() *cobra.Command {
	var (
		o       bench.ParityOptions
		brokers string
		out     string
	)
	cmd := &cobra.Command{
		Use:   "parity",
		Short: "Compare tidemark's results with Kafka Streams' on the same input: counts (plain, windowed, session, table), stream-stream and stream-table joins",
		Long: `parity produces one seeded input per workload (Zipf-skewed hot and cold keys,
out-of-order timestamps, records later than the window's grace, equal
timestamps; two inputs for the joins), runs Kafka Streams (exactly_once_v2,
its defaults, null-padded join results emitted on every record instead of
at most once a second) and then tidemark (adaptive) on it, each into its own
output topic, reads both outputs read_committed to the end and compares them:

  count       the final count of every key
  windowed    the final count of every (key, window start) of the tumbling
              window count with EmitFinal / suppress(untilWindowCloses):
              which windows closed and, through their counts, which late
              records were dropped
  join        the multiset of joined pairs of a ±--join-window inner join
  left-join   the same of the left join, null-padded "L|null" pairs too
  outer-join  the same of the outer join, "L|null" and "null|R" pairs too
  session     the final count of every (key, session start, session end)
              of the --session-gap session count, EmitFinal /
              suppress(untilWindowCloses)
  table-agg   the final count of every category of the input read as a
              table (5% of its records deletes), re-keyed by category (the
              value's last two characters) and counted: every update
              subtracts the row from its old category
  table-join  the multiset of pairs of a stream-table left join, the
              table's updates (a quarter as many, 5% deletes) all
              timestamped before the stream, so every stream record meets
              its row's last value

Kafka Streams' record cache emits fewer intermediate updates, so count,
windowed, session and table-agg compare last values, not update streams
(the session count runs Kafka Streams without the cache: with it, whether a
merged session was emitted first depends on commit timing). It prints and writes, per
workload, records in, entries and outputs of each side and the mismatches
(the first few with key, tidemark's value and Kafka Streams'), to
internal/bench/results/<time>-parity/parity.{json,md} and a copy in
internal/bench/results/parity-latest/ (not with --out). The seed is logged;
--seed reruns an input. A run takes a few minutes; the Kafka Streams peer
in internal/bench/streams is built with Maven on first use.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			root, err := testbroker.FindRepoRoot()
			if err != nil {
				return fmt.Errorf("bench parity needs the tidemark checkout (for the broker and internal/bench/streams): %w", err)
			}
			if o.Brokers, err = benchBrokers(ctx, brokers); err != nil {
				return err
			}
			o.Env.StreamsDir = filepath.Join(root, "internal", "bench", "streams")
			if err := buildStreamsPeer(ctx, o.Env.StreamsDir); err != nil {
				return err
			}
			dirs := resultsDirs(root, "parity", out, time.Now())
			rep, err := bench.RunParity(ctx, o, progress)
			if rep == nil {
				return err
			}
			return writeReport(rep, dirs, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("TIDEMARK_BROKERS"), "seed brokers (default: start or reuse the make kafka-up broker)")
	f.StringVar(&out, "out", "", "results directory (default internal/bench/results/<time>-parity, copied to parity-latest; an explicit directory is not copied)")
	f.StringSliceVar(&o.Workloads, "workloads", nil, "workloads to compare, of count, windowed, join, left-join, outer-join, session, table-agg, table-join (default all)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the input (default: the time; logged)")
	f.IntVar(&o.Records, "records", 0, "input records per workload (default 20000; the join's split over its two inputs)")
	f.IntVar(&o.Keys, "keys", 0, "distinct keys, Zipf-skewed (default 200)")
	f.Int32Var(&o.Partitions, "partitions", 0, "partitions of every topic (default 4)")
	f.DurationVar(&o.WindowSize, "window", 0, "tumbling window of the windowed count (default 2s)")
	f.DurationVar(&o.Grace, "grace", 0, "grace of the window, the joins and the sessions (default 500ms)")
	f.DurationVar(&o.JoinWindow, "join-window", 0, "the join's time difference, either way (default 1s)")
	f.DurationVar(&o.SessionGap, "session-gap", 0, "inactivity gap of the session count (default 500ms)")
	f.DurationVar(&o.Step, "step", 0, "mean event-time advance per record (default 10ms)")
	return cmd
}
