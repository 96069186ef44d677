package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func init() { RegisterWorker("tidemark", runTidemark) }

// workloadTopology is tidemark's side of each workload, output for output
// the same as the Kafka Streams peer (internal/bench/streams): UTF-8 keys and values,
// counts as decimal strings.
func workloadTopology(job Job) (*topology.Topology, error) {
	if job.Workload == "table-agg" { // its input is a table, not a stream
		return tableAggTopology(job)
	}
	b := topology.NewBuilder(job.AppID)
	in := b.Stream(job.Input, serde.String(), serde.String())
	switch job.Workload {
	case "stateless":
		in.Filter(func(_, v string) bool { return !strings.HasPrefix(v, "#") }).
			MapValues(func(_, v string) string { return strings.ToUpper(v) }).
			To(job.Output)
	case "count":
		countTo(in, job, job.Output)
	case "windowed":
		windowedCountTo(in, job, job.Output, nil)
	case "sweep":
		// bench sweep: both stateful workloads on the one input, so one
		// run per policy measures both under the same load.
		countTo(in, job, job.Output)
		windowedCountTo(in, job, job.WindowOutput, newCloseReporter(job.Partitions))
	case "latest":
		// Failover's table: the latest value of every key (~100 B each).
		in.GroupByKey(topology.Named("latest")).Reduce(func(_, v string) string { return v }, topology.Named("latest")).
			ToStream().To(job.Output)
	case "join":
		inventory := b.Table(job.Table, serde.String(), serde.String(), topology.Named("inventory"))
		in.JoinTable(inventory, func(_ string, payment, stock string) string { return payment + "|" + stock },
			topology.Named("enrich")).
			WithSerdes(serde.String(), serde.String()).To(job.Output)
	case "stream-join":
		// bench parity's stream-stream inner join: Input and Table are
		// two streams, joined within ±WindowSize with Grace.
		other := b.Stream(job.Table, serde.String(), serde.String())
		in.Join(other, func(_ string, left, right string) string { return left + "|" + right },
			topology.JoinWindowsOf(job.WindowSize, job.Grace), topology.Named("sjoin")).
			WithSerdes(serde.String(), serde.String()).To(job.Output)
	case "table-left-join":
		// bench parity's stream-table left join: Table is the table.
		rows := b.Table(job.Table, serde.String(), serde.String(), topology.Named("rows"))
		in.LeftJoinTable(rows, func(_ string, v, row string, found bool) string { return v + "|" + orNull(row, found) },
			topology.Named("enrich")).
			WithSerdes(serde.String(), serde.String()).To(job.Output)
	case "stream-left-join":
		// bench parity's left join: as stream-join, and each left record
		// no right record joined as "L|null" once its window closes.
		other := b.Stream(job.Table, serde.String(), serde.String())
		in.LeftJoin(other, func(_ string, left, right string, found bool) string { return left + "|" + orNull(right, found) },
			topology.JoinWindowsOf(job.WindowSize, job.Grace), topology.Named("sjoin")).
			WithSerdes(serde.String(), serde.String()).To(job.Output)
	case "stream-outer-join":
		// bench parity's outer join: unjoined records of either side as
		// "L|null" / "null|R" once their window closes.
		other := b.Stream(job.Table, serde.String(), serde.String())
		in.OuterJoin(other, func(_ string, left string, lok bool, right string, rok bool) string {
			return orNull(left, lok) + "|" + orNull(right, rok)
		}, topology.JoinWindowsOf(job.WindowSize, job.Grace), topology.Named("sjoin")).
			WithSerdes(serde.String(), serde.String()).To(job.Output)
	case "session":
		sessionCountTo(in, job)
	default:
		return nil, fmt.Errorf("bench: unknown workload %q", job.Workload)
	}
	return b.Build()
}

// benchRecordCache is the keys per task of the *-cache systems' record
// cache: every key of the benchmarks' key spaces fits, so only commits
// forward, as with Kafka Streams' 10 MB cache.
const benchRecordCache = 100_000

// countTo is the count workload: every update of a key's count, as a
// decimal string, to out; with job.RecordCache, each key's latest per
// commit.
func countTo(in topology.Stream[string, string], job Job, out string) {
	opts := []topology.StoreOption{topology.Named("counts")}
	if job.RecordCache > 0 {
		opts = append(opts, topology.WithRecordCache(job.RecordCache))
	}
	in.GroupByKey(topology.Named("counts")).Count(opts...).ToStream().
		MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(serde.String(), serde.String()).To(out)
}

// windowedCountTo is the windowed workload: per key, the final count of
// each tumbling window (job.WindowSize, job.Grace) as "<key>@<start ms>";
// with closes, each window close's moment is reported (sweep_close.go).
func windowedCountTo(in topology.Stream[string, string], job Job, out string, closes *closeReporter) {
	closeAfter := (job.WindowSize + job.Grace).Milliseconds()
	topology.WindowedBy(in.GroupByKey(topology.Named("window-input")),
		topology.TumblingWindows(job.WindowSize, job.Grace)).
		Count(topology.Named("window-counts"), topology.EmitFinal()).ToStream().
		Map(func(w topology.Windowed[string], n int64) (string, string) {
			if closes != nil {
				closes.final(w.Key, w.Start+closeAfter)
			}
			return w.Key + "@" + strconv.FormatInt(w.Start, 10), strconv.FormatInt(n, 10)
		}).
		WithSerdes(serde.String(), serde.String()).To(out)
}

func runTidemark(ctx context.Context, job Job, ready func()) error {
	topo, err := workloadTopology(job)
	if err != nil {
		return err
	}
	return runApp(ctx, job, topo, nil, ready)
}

// runApp runs topo as job's application, with extra options after the
// harness's own, until ctx is done, calling ready once the app owns its
// partitions.
func runApp(ctx context.Context, job Job, topo *topology.Topology, extra []processor.Option, ready func()) error {
	policy := frontier.Options{Policy: frontier.PolicyAdaptive, P99Tolerance: job.P99Tolerance}
	if job.Policy == "fixed" {
		policy = frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: job.CommitInterval}
	}
	instance := "bench"
	if job.Instance != "" {
		instance = job.Instance
	}
	opts := []processor.Option{
		processor.WithBrokers(job.Brokers...),
		processor.WithStateDir(job.StateDir),
		processor.WithInstanceID(instance),
		processor.WithCommitPolicy(policy),
		processor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: workerLogLevel()}))),
	}
	if err := servePprof(ctx); err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	if a := os.Getenv("TIDEMARK_BENCH_HTTP"); a != "" {
		opts = append(opts, processor.WithHTTP(a))
	}
	if job.Threads > 0 {
		opts = append(opts, processor.WithThreads(job.Threads))
	}
	if job.Pipelined != "" {
		opts = append(opts, processor.WithPipelinedCommits(job.Pipelined == "on"))
	}
	fo, err := tidemarkMemberOptions(job.MemberConfig)
	if err != nil {
		return err
	}
	app, err := processor.NewApp(topo, append(append(opts, fo...), extra...)...)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- app.Run(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	logEvery := time.NewTicker(time.Second)
	defer logEvery.Stop()
	var report, reportTenants <-chan time.Time
	if job.ReportCommits > 0 {
		t := time.NewTicker(job.ReportCommits)
		defer t.Stop()
		report = t.C
	}
	if job.ReportTenants > 0 {
		t := time.NewTicker(job.ReportTenants)
		defer t.Stop()
		reportTenants = t.C
	}
	for {
		select {
		case <-report:
			sn := app.ControllerSnapshot()
			printCommits(sn.Commits, sn.CommitLatency)
		case <-reportTenants:
			writeTenants(os.Stdout, app.TenantStats())
		case err := <-errc:
			return err
		case <-tick.C:
			if app.Ready() {
				ready()
			}
		case <-logEvery.C:
			if workerLogLevel() == slog.LevelInfo {
				sn := app.ControllerSnapshot()
				slog.Info("controller", "interval", sn.Interval, "min_spacing", sn.MinSpacing, "predicted", sn.PredictedStaleness,
					"observed", sn.ObservedStaleness, "latency", sn.CommitLatency, "cost", sn.CommitCost, "rho", sn.Utilization,
					"load", sn.Load, "lambda", sn.ArrivalRate, "backlog", sn.Backlog, "overloaded", sn.Overloaded,
					"commits", sn.Commits, "by", fmt.Sprint(sn.CommitsBy), "service", sn.ServiceTime,
					"cost_per_record", sn.CostPerRecord, "latency_per_record", sn.LatencyPerRecord)
			}
		}
	}
}

// workerLogLevel is WARN unless TIDEMARK_BENCH_LOG=info (to see restore and
// startup timings of the workers).
func workerLogLevel() slog.Level {
	switch os.Getenv("TIDEMARK_BENCH_LOG") {
	case "info":
		return slog.LevelInfo
	case "debug": // the Kafka client's own info lines too
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
