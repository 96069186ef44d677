package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/term"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/schemas"
)

func init() { rootCmd.AddCommand(newGenCmd()) }

// genFlags are the raw flag values of `tidemark gen`; check turns them into
// a gen.Config, naming the flag and its accepted range on error.
type genFlags struct {
	brokers       []string
	registry      string
	rate          float64
	profile       string
	rampFrom      float64
	rampOver      time.Duration
	burstFactor   float64
	burstEvery    time.Duration
	burstFor      time.Duration
	duration      time.Duration
	count         uint64
	seed          uint64
	tenants       int
	users         int
	topicPrefix   string
	format        string
	maxDisorder   time.Duration
	start         string
	createTopics  bool
	partitions    int32
	replication   int16
	dialTimeout   time.Duration
	progressEvery time.Duration
	dryRun        bool
}

// newGenCmd builds the command afresh, so tests get clean flag state.
func newGenCmd() *cobra.Command {
	var f genFlags
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Produce realistic marketplace traffic to Kafka",
		Long: `gen produces a deterministic stream of marketplace events — clicks, cart
changes, inventory mutations, payments and fulfillment — to Kafka at the rate
of a steady, ramp or burst profile. The same --seed and --start give the same
records byte for byte.

Brokers come from --brokers or the TIDEMARK_BROKERS environment variable.`,
		Example: `  tidemark gen --brokers localhost:9092 --create-topics --rate 2000 --duration 1m
  TIDEMARK_BROKERS=localhost:9092 tidemark gen --profile burst --count 100000 --topics demo.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGen(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.brokers, "brokers", nil, "Kafka bootstrap brokers, comma-separated (default $TIDEMARK_BROKERS)")
	fl.StringVar(&f.registry, "registry", "", "Schema Registry URL: write the Confluent wire format, registering schemas as <topic>-value (default $TIDEMARK_REGISTRY)")
	fl.Float64Var(&f.rate, "rate", 1000, "events per second over all topics (for ramp: the final rate; for burst: the base rate)")
	fl.StringVar(&f.profile, "profile", "steady", "rate profile: steady, ramp or burst")
	fl.Float64Var(&f.rampFrom, "ramp-from", 0, "ramp profile: starting rate (default rate/10)")
	fl.DurationVar(&f.rampOver, "ramp-over", time.Minute, "ramp profile: time to reach --rate")
	fl.Float64Var(&f.burstFactor, "burst-factor", 5, "burst profile: rate multiplier during a burst")
	fl.DurationVar(&f.burstEvery, "burst-every", 30*time.Second, "burst profile: period between burst starts")
	fl.DurationVar(&f.burstFor, "burst-for", 5*time.Second, "burst profile: length of each burst")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (0: no limit)")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many events (0: no limit)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed; with --start, fixes the stream")
	fl.IntVar(&f.tenants, "tenants", 8, "number of sellers, of Zipf-distributed sizes")
	fl.IntVar(&f.users, "users", 10000, "number of users")
	fl.StringVar(&f.topicPrefix, "topics", "", "prefix for the topic names clicks, carts, inventory, payments, fulfillment, products, tenants")
	fl.StringVar(&f.format, "format", "avro", "value encoding: avro or json")
	fl.DurationVar(&f.maxDisorder, "max-disorder", 2*time.Second, "how far out of order event times may be (0: in order)")
	fl.StringVar(&f.start, "start", "", "event-time origin, RFC 3339 (default: now)")
	fl.BoolVar(&f.createTopics, "create-topics", false, "create the topics first (existing topics are kept)")
	fl.Int32Var(&f.partitions, "partitions", 6, "partitions per topic, with --create-topics")
	fl.Int16Var(&f.replication, "replication-factor", 1, "replication factor, with --create-topics")
	fl.DurationVar(&f.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for a broker to answer")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print events as JSON lines to stdout instead of producing, unpaced; needs --count or --duration")
	fl.DurationVar(&f.progressEvery, "progress-every", 5*time.Second, "interval of progress log lines when stderr is not a terminal")
	return cmd
}

// check validates the flags and builds the generator's configuration.
func (f genFlags) check(now time.Time) (gen.Config, error) {
	var cfg gen.Config
	if f.dryRun && f.count == 0 && f.duration == 0 {
		return cfg, errors.New("--dry-run needs --count or --duration, or it prints forever")
	}
	if len(f.brokers) == 0 && !f.dryRun {
		return cfg, errors.New("--brokers is required (or set TIDEMARK_BROKERS), e.g. --brokers localhost:9092")
	}
	if !(f.rate > 0 && f.rate <= gen.MaxRate) {
		return cfg, fmt.Errorf("--rate is %v, accepted range (0, %d] events/s", f.rate, gen.MaxRate)
	}
	kind := gen.ProfileKind(f.profile)
	if kind != gen.Steady && kind != gen.Ramp && kind != gen.Burst {
		return cfg, fmt.Errorf("--profile is %q, accepted steady, ramp or burst", f.profile)
	}
	if f.rampFrom < 0 || f.rampFrom > gen.MaxRate {
		return cfg, fmt.Errorf("--ramp-from is %v, accepted range [0, %d] events/s (0: --rate/10)", f.rampFrom, gen.MaxRate)
	}
	if f.rampOver <= 0 {
		return cfg, fmt.Errorf("--ramp-over is %v, must be positive", f.rampOver)
	}
	if !(f.burstFactor >= 1) || f.rate*f.burstFactor > gen.MaxRate {
		return cfg, fmt.Errorf("--burst-factor is %v, accepted range [1, %v] at --rate %v", f.burstFactor, gen.MaxRate/f.rate, f.rate)
	}
	if f.burstEvery <= 0 || f.burstFor <= 0 || f.burstFor > f.burstEvery {
		return cfg, fmt.Errorf("--burst-for %v and --burst-every %v: need 0 < --burst-for <= --burst-every", f.burstFor, f.burstEvery)
	}
	if f.duration < 0 {
		return cfg, fmt.Errorf("--duration is %v, must not be negative", f.duration)
	}
	if f.tenants < 1 || f.tenants > 10000 {
		return cfg, fmt.Errorf("--tenants is %d, accepted range 1..10000", f.tenants)
	}
	if f.users < 1 || f.users > 100_000_000 {
		return cfg, fmt.Errorf("--users is %d, accepted range 1..100000000", f.users)
	}
	format := gen.Format(f.format)
	if format != gen.FormatAvro && format != gen.FormatJSON {
		return cfg, fmt.Errorf("--format is %q, accepted avro or json", f.format)
	}
	if f.registry != "" && format != gen.FormatAvro {
		return cfg, fmt.Errorf("--format is %q, but --registry writes Avro in the Confluent wire format", f.format)
	}
	if f.maxDisorder < 0 || f.maxDisorder > time.Hour {
		return cfg, fmt.Errorf("--max-disorder is %v, accepted range 0..1h", f.maxDisorder)
	}
	if f.partitions < 1 || f.partitions > 10000 {
		return cfg, fmt.Errorf("--partitions is %d, accepted range 1..10000", f.partitions)
	}
	if f.replication < 1 {
		return cfg, fmt.Errorf("--replication-factor is %d, must be at least 1", f.replication)
	}
	if f.dialTimeout <= 0 {
		return cfg, fmt.Errorf("--dial-timeout is %v, must be positive", f.dialTimeout)
	}
	start := now.Truncate(time.Millisecond) // the schemas' precision; logged for --start
	if f.start != "" {
		t, err := time.Parse(time.RFC3339Nano, f.start)
		if err != nil {
			return cfg, fmt.Errorf("--start is %q, want RFC 3339 such as 2026-01-01T00:00:00Z: %w", f.start, err)
		}
		start = t
	}
	disorder := f.maxDisorder
	if disorder == 0 {
		disorder = gen.NoDisorder
	}
	cfg = gen.Config{
		Seed:  f.seed,
		Start: start,
		Profile: gen.Profile{Kind: kind, Rate: f.rate, RampFrom: f.rampFrom, RampOver: f.rampOver,
			BurstFactor: f.burstFactor, BurstEvery: f.burstEvery, BurstFor: f.burstFor},
		Tenants:     f.tenants,
		Users:       f.users,
		MaxDisorder: disorder,
		Topics:      gen.DefaultTopics.WithPrefix(f.topicPrefix),
		Format:      format,
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func runGen(cmd *cobra.Command, f genFlags) error {
	if len(f.brokers) == 0 {
		for _, b := range strings.Split(os.Getenv("TIDEMARK_BROKERS"), ",") {
			if b = strings.TrimSpace(b); b != "" {
				f.brokers = append(f.brokers, b)
			}
		}
	}
	if f.registry == "" {
		f.registry = os.Getenv("TIDEMARK_REGISTRY")
	}
	cfg, err := f.check(time.Now())
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if f.dryRun {
		return dryRun(ctx, cmd.OutOrStdout(), cfg, f.count, f.duration)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))

	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.DialTimeout(f.dialTimeout))
	if err != nil {
		return fmt.Errorf("kafka client for %s: %w", strings.Join(f.brokers, ","), err)
	}
	defer cl.Close()
	if err := ping(ctx, cl, f.brokers, f.dialTimeout); err != nil {
		return err
	}
	if f.registry != "" {
		if cfg.Serdes, err = registrySerdes(ctx, f.registry, cfg.Topics, f.dialTimeout); err != nil {
			return err
		}
	}
	topics := cfg.Topics.All()
	if f.createTopics {
		if err := createTopics(ctx, cl, log, topics, f.partitions, f.replication); err != nil {
			return err
		}
	} else if err := requireTopics(ctx, cl, topics); err != nil {
		return err
	}

	prog, finish := progressReporter(cmd.ErrOrStderr(), log, f.count)
	every := f.progressEvery
	if isTerminal(cmd.ErrOrStderr()) {
		every = 200 * time.Millisecond
	}
	log.Info("generating", "brokers", strings.Join(f.brokers, ","), "topics", strings.Join(topics, ","),
		"profile", cfg.Profile.Kind, "rate", cfg.Profile.Rate, "seed", cfg.Seed, "start", cfg.Start.Format(time.RFC3339Nano))
	st, err := gen.Run(ctx, cl, gen.RunOptions{Config: cfg, Count: f.count, Duration: f.duration, Progress: prog, ProgressEvery: every})
	finish()
	if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "produced %d events (%d acked, %d failed) in %v to %s\n",
		st.Sent, st.Acked, st.Failed, st.Elapsed.Round(time.Millisecond), strings.Join(topics, ", "))
	if st.Failed > 0 && err == nil {
		return fmt.Errorf("%d of %d records failed", st.Failed, st.Sent)
	}
	return nil
}

// dryRun prints the stream that gen would produce, one JSON object a line.
func dryRun(ctx context.Context, w io.Writer, cfg gen.Config, count uint64, d time.Duration) error {
	g, err := gen.New(cfg)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for n := uint64(0); (count == 0 || n < count) && (d == 0 || g.NextOffset() < d); n++ {
		if err := ctx.Err(); err != nil {
			return nil // interrupted: what was printed stands
		}
		ev := g.Next()
		line := struct {
			Topic     string        `json:"topic"`
			Key       string        `json:"key"`
			Offset    string        `json:"offset"`
			EventTime time.Time     `json:"event_time"`
			Type      string        `json:"type"`
			Value     schemas.Event `json:"value"`
		}{g.Topic(ev.Stream), ev.Key(), ev.Offset.String(), ev.Time(), string(ev.Value.Type()), ev.Value}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("write event %d: %w", ev.Seq, err)
		}
	}
	return nil
}

// connect returns a client of brokers and the options it was made with,
// once a broker answers (see ping). The caller closes the client.
func connect(ctx context.Context, brokers []string, dialTimeout time.Duration) (*kgo.Client, []kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DialTimeout(dialTimeout)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	if err := ping(ctx, cl, brokers, dialTimeout); err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, opts, nil
}

// ping fails fast, naming the addresses, when no broker answers: a kgo
// client would otherwise retry produces forever (gen) or fetches for a long
// time (replay).
func ping(ctx context.Context, cl *kgo.Client, brokers []string, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach Kafka broker %s within %v (--dial-timeout): %w", strings.Join(brokers, ","), timeout, err)
	}
	return nil
}

func registrySerdes(ctx context.Context, url string, topics gen.Topics, timeout time.Duration) (*gen.Serdes, error) {
	src, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return nil, fmt.Errorf("--registry %q: %w", url, err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sd, err := gen.RegistrySerdes(rctx, schemas.NewRegistry(src), topics)
	if err != nil {
		return nil, fmt.Errorf("register schemas with %s: %w", url, err)
	}
	return sd, nil
}

func createTopics(ctx context.Context, cl *kgo.Client, log *slog.Logger, topics []string, partitions int32, rf int16) error {
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, rf, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %s: %w", strings.Join(topics, ","), err)
	}
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok:
			return fmt.Errorf("create topic %q: no response from the broker", t)
		case errors.Is(r.Err, kerr.TopicAlreadyExists):
			log.Info("topic exists", "topic", t)
		case r.Err != nil:
			return fmt.Errorf("create topic %q (%d partitions, replication %d): %w %s", t, partitions, rf, r.Err, r.ErrMessage)
		default:
			log.Info("created topic", "topic", t, "partitions", partitions, "replication", rf)
		}
	}
	return nil
}

// requireTopics fails, before anything is written, when a topic gen
// writes to is missing: found part-way, the producer fails with
// UNKNOWN_TOPIC_OR_PARTITION after writing the other topics' share, and
// the inputs are left half-written.
func requireTopics(ctx context.Context, cl *kgo.Client, topics []string) error {
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list topics %s: %w", strings.Join(topics, ","), err)
	}
	var missing []string
	for _, t := range topics {
		if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		} else if d.Err != nil {
			return fmt.Errorf("describe topic %q: %w", t, d.Err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("topics %s do not exist: create them with --create-topics (nothing was written)", strings.Join(missing, ", "))
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressReporter shows a progress bar on a terminal and structured log
// lines elsewhere (CI, files, pipes), where a bar would be garbage.
func progressReporter(w io.Writer, log *slog.Logger, count uint64) (func(gen.Stats), func()) {
	if !isTerminal(w) {
		return func(s gen.Stats) {
			log.Info("gen progress", "sent", s.Sent, "acked", s.Acked, "failed", s.Failed,
				"elapsed", s.Elapsed.Round(time.Millisecond), "target_rate", s.Rate, "behind", s.Behind.Round(time.Millisecond), "done", s.Done)
		}, func() {}
	}
	max := int64(-1) // spinner: no known end
	if count > 0 {
		max = int64(count)
	}
	bar := progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("producing"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	return func(s gen.Stats) {
			_ = bar.Set64(int64(s.Acked))
			if s.Behind > time.Second {
				bar.Describe(fmt.Sprintf("producing (%v behind schedule)", s.Behind.Round(time.Second)))
			}
		}, func() {
			_ = bar.Finish()
		}
}
