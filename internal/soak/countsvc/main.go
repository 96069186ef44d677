// Command countsvc is the service the soak campaign hurts: a per-key count
// written only with tidemark's public API, the way a user would write it
// from the README.
//
// It reads JSON events ({"seq": n}) keyed by a string, counts them per key
// and writes every new count to the output topic as a decimal string. A
// record whose value is not a JSON event (a poison pill) goes to the
// dead-letter topic and is not counted. SIGTERM or Ctrl-C commits what is in
// flight, leaves the group and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Event is the input value. The count does not need its fields; decoding
// them is what makes a malformed record undecodable.
type Event struct {
	Seq int64 `json:"seq"`
}

func main() {
	os.Exit(run())
}

func run() int {
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	var (
		brokers    = flag.String("brokers", env("COUNTSVC_BROKERS", ""), "seed brokers, comma-separated (COUNTSVC_BROKERS)")
		app        = flag.String("app", env("COUNTSVC_APP", "countsvc"), "application id: group id and internal topic prefix (COUNTSVC_APP)")
		in         = flag.String("in", env("COUNTSVC_IN", "events"), "input topic (COUNTSVC_IN)")
		out        = flag.String("out", env("COUNTSVC_OUT", "counts"), "output topic (COUNTSVC_OUT)")
		dlq        = flag.String("dlq", env("COUNTSVC_DLQ", "events-dlq"), "dead-letter topic (COUNTSVC_DLQ)")
		stateDir   = flag.String("state-dir", env("COUNTSVC_STATE_DIR", "countsvc-state"), "state directory (COUNTSVC_STATE_DIR)")
		instanceID = flag.String("instance-id", env("COUNTSVC_INSTANCE_ID", ""), "instance id; default: persisted in the state dir (COUNTSVC_INSTANCE_ID)")
		httpAddr   = flag.String("http", env("COUNTSVC_HTTP", ""), "HTTP address for /metrics, /frontier, queries; empty: none (COUNTSVC_HTTP)")
		session    = flag.Duration("session-timeout", 0, "consumer group session timeout; 0: tidemark's default")
		guarantee  = flag.String("guarantee", env("COUNTSVC_GUARANTEE", "exactly_once"), "exactly_once or at_least_once (COUNTSVC_GUARANTEE)")
		logLevel   = flag.String("log-level", env("COUNTSVC_LOG_LEVEL", "info"), "debug, info, warn or error (COUNTSVC_LOG_LEVEL)")
		threads    = flag.Int("threads", 0, "stream threads (processor.WithThreads); 0: tidemark's default")
		sortedMin  = flag.Int64("restore-mode-min-offsets", 0, "changelog.Options.RestoreModeMinOffsets: the smallest restore into one task DB that is sorted (into an empty DB) or defers compaction; 0: tidemark's default")
		standbys   = flag.Int("standbys", 0, "standby replicas per stateful task (processor.WithStandbyReplicas); 0: none")
		snapStore  = flag.String("snapshot-store", env("COUNTSVC_SNAPSHOT_STORE", ""), "snapshot store URL shared by every instance, e.g. file:///dir (processor.WithSnapshotStore); empty: no snapshots (COUNTSVC_SNAPSHOT_STORE)")
		probing    = flag.Duration("probing-rebalance-interval", 0, "processor.WithProbingRebalanceInterval: how often an instance warming up tasks forces a probing rebalance; 0: tidemark's default")
		ckptMax    = flag.Duration("checkpoint-max-interval", 0, "frontier.CheckpointOptions.MaxInterval (processor.WithCheckpointPolicy): the longest time between checkpoints, and so between snapshots; 0: tidemark's default")
		proxy      = flag.String("broker-proxy", env("COUNTSVC_BROKER_PROXY", ""), "dial this address for every broker connection (the soak harness's per-instance proxy, which can cut this instance off the broker); empty: dial the brokers (COUNTSVC_BROKER_PROXY)")
		pipelined  = flag.String("pipelined", env("COUNTSVC_PIPELINED", ""), "pipelined commits: on, off, or empty for tidemark's default (COUNTSVC_PIPELINED; the soak harness passes its environment on)")
	)
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "countsvc: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *brokers == "" {
		log.Error("--brokers is required")
		return 2
	}

	b := topology.NewBuilder(*app)
	b.Stream(*in, serde.String(), serde.JSON[Event]()).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().
		MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(serde.String(), serde.String()).
		To(*out)
	topo, err := b.Build()
	if err != nil {
		log.Error("build topology", "err", err)
		return 1
	}

	g, err := processor.ParseGuarantee(*guarantee)
	if err != nil {
		log.Error("--guarantee", "err", err)
		return 2
	}
	opts := []processor.Option{
		processor.WithGuarantee(g),
		processor.WithBrokers(strings.Split(*brokers, ",")...),
		processor.WithStateDir(*stateDir),
		processor.WithDeadLetterTopic(*dlq),
		processor.WithLogger(log),
	}
	if *instanceID != "" {
		opts = append(opts, processor.WithInstanceID(*instanceID))
	}
	if *threads > 0 {
		opts = append(opts, processor.WithThreads(*threads))
	}
	if *httpAddr != "" {
		opts = append(opts, processor.WithHTTP(*httpAddr))
	}
	if *standbys > 0 {
		opts = append(opts, processor.WithStandbyReplicas(*standbys))
	}
	if *snapStore != "" {
		opts = append(opts, processor.WithSnapshotStore(*snapStore))
	}
	if *ckptMax > 0 {
		opts = append(opts, processor.WithCheckpointPolicy(frontier.CheckpointOptions{MaxInterval: *ckptMax}))
	}
	if *probing > 0 {
		opts = append(opts, processor.WithProbingRebalanceInterval(*probing))
	}
	switch *pipelined {
	case "":
	case "on", "off":
		opts = append(opts, processor.WithPipelinedCommits(*pipelined == "on"))
	default:
		log.Error("--pipelined: want on, off or empty", "got", *pipelined)
		return 2
	}
	if *proxy != "" {
		via := *proxy
		opts = append(opts, processor.WithClientOpts(kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, via)
		})))
	}
	if *sortedMin > 0 {
		n := *sortedMin
		opts = append(opts, func(c *processor.Config) { c.State.RestoreModeMinOffsets = n })
	}
	if *session > 0 {
		d := *session
		opts = append(opts, func(c *processor.Config) { c.SessionTimeout = d })
	}
	a, err := processor.NewApp(topo, opts...)
	if err != nil {
		log.Error("configure", "err", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	log.Info("countsvc starting", "app", *app, "in", *in, "out", *out, "dlq", *dlq, "instance", *instanceID, "state_dir", *stateDir, "pid", os.Getpid())
	if err := a.Run(ctx); err != nil {
		log.Error("countsvc failed", "err", err, "after", time.Since(start).Round(time.Millisecond))
		return 1
	}
	log.Info("countsvc stopped", "after", time.Since(start).Round(time.Millisecond))
	return 0
}
