package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

func init() { rootCmd.AddCommand(newRunCmd()) }

func newRunCmd() *cobra.Command {
	var (
		configPath string
		f          = defaultServiceConfig()
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the marketplace pipelines as a service against Kafka",
		Long: `run runs the marketplace pipelines (inventory, fraud, orders, pricing) as a member of
a consumer group: start as many replicas with the same --application as you
like and the group spreads the partitions over them. SIGTERM or Ctrl-C
commits what is in flight, closes the tasks and leaves the group.

Configuration, later sources overriding earlier ones: defaults, a YAML or
JSON file (--config or $TIDEMARK_CONFIG), TIDEMARK_* environment variables
(TIDEMARK_BROKERS, TIDEMARK_STATE_DIR, TIDEMARK_HTTP, TIDEMARK_PIPELINES,
TIDEMARK_GUARANTEE, TIDEMARK_COMMIT_POLICY, TIDEMARK_COMMIT_INTERVAL,
TIDEMARK_STALENESS_TARGET, TIDEMARK_DEAD_LETTER_TOPIC, ...: the flag name
in capitals), then flags.

Security (security: in the file, --tls-* and --sasl-* flags): TLS with a CA
file, a client certificate for mutual TLS and a server name; SASL PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512. The SASL password has no flag, so that it
stays out of the process list: give it in the file, or name an environment
variable (--sasl-password-env) or a file (--sasl-password-file) holding it.

Per-tenant freshness (tenant_classes: in the file only): each class gives
its tenants a staleness target and a per-tenant rate limit, e.g.
  tenant_classes:
    gold: {staleness_target: 50ms, tenants: [s1, s2]}
A listed tenant's target commits its pending outputs early, under the
fixed policy too; tenants in no class get staleness_target.

Several applications in one process (apps: in the file only): each entry
overrides the top-level settings for one App, e.g. one per tenant class
with its own application, topic_prefix, http and commit settings; they
start and stop together and one failing stops all.`,
		Example: `  tidemark run --brokers localhost:9092 --create-topics
  TIDEMARK_BROKERS=kafka:9092 tidemark run --pipelines inventory,fraud --commit-policy fixed --commit-interval 100ms
  tidemark run --config tidemark.yaml
  KAFKA_PASSWORD=... tidemark run --brokers kafka:9093 --tls --tls-ca-file ca.pem \
      --sasl-mechanism SCRAM-SHA-512 --sasl-username tidemark --sasl-password-env KAFKA_PASSWORD`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := resolveServiceConfig(configPath, os.Getenv, cmd.Flags(), f)
			if err != nil {
				return err
			}
			s, err := cfg.validate()
			if err != nil {
				return err
			}
			return s.run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	addServiceFlags(cmd.Flags(), &configPath, &f)
	return cmd
}

// addServiceFlags registers the flags of serviceConfig on fl: `tidemark
// run` takes them, and `tidemark describe` takes the same ones so it
// describes the topology a run with the same arguments runs.
func addServiceFlags(fl *pflag.FlagSet, configPath *string, f *serviceConfig) {
	fl.StringVar(configPath, "config", "", "YAML or JSON config file (default $TIDEMARK_CONFIG)")
	fl.StringVar(&f.Application, "application", f.Application, "application id: consumer group and internal topic prefix")
	fl.StringSliceVar(&f.Brokers, "brokers", nil, "Kafka bootstrap brokers, comma-separated")
	fl.StringVar(&f.StateDir, "state-dir", f.StateDir, "parent of the local state: this instance keeps it in <state-dir>/<application> (processor.WithStateDir takes that full path)")
	fl.StringVar(&f.HTTP, "http", f.HTTP, "HTTP listen address for /metrics, /healthz, /readyz, /frontier, /stores, /ui (empty: off)")
	fl.StringVar(&f.AdvertisedHTTP, "advertised-http", "", "address other replicas give clients for keys this one owns (default --http)")
	fl.StringVar(&f.InstanceID, "instance-id", "", "stable instance id (default: persisted in the state dir)")
	fl.StringSliceVar(&f.Pipelines, "pipelines", f.Pipelines, "pipelines to run: inventory, fraud, orders, pricing")
	fl.StringVar(&f.Guarantee, "guarantee", f.Guarantee, "exactly_once or at_least_once")
	fl.StringVar(&f.CommitPolicy, "commit-policy", f.CommitPolicy, "adaptive (staleness cost model) or fixed")
	fl.StringVar(&f.CommitInterval, "commit-interval", "", "fixed: the commit period (default 100ms); adaptive: the longest interval (default 5s)")
	fl.StringVar(&f.StalenessTarget, "staleness-target", "", "end-to-end staleness target of the adaptive policy (default 1s)")
	fl.StringVar(&f.DeadLetterTopic, "dead-letter-topic", "", "send undecodable input records here instead of failing")
	fl.BoolVar(&f.SkipUndecodable, "skip-undecodable", false, "drop and count undecodable input records instead of failing")
	fl.StringVar(&f.TopicPrefix, "topic-prefix", "", "prefix of every input and output topic name")
	fl.BoolVar(&f.CreateTopics, "create-topics", false, "create missing input, output and dead-letter topics")
	fl.Int32Var(&f.Partitions, "partitions", f.Partitions, "partitions of topics --create-topics creates")
	fl.Int64Var(&f.FraudThreshold, "fraud-threshold", 0, "payment attempts per user per window that raise a fraud alert (default 20)")
	fl.StringVar(&f.ShipWithin, "ship-within", "", "fulfillment deadline after capture, event time (default 1m)")
	fl.StringVar(&f.Grace, "grace", "", "allowed lateness of every event-time operator (default 5s)")
	fl.StringVar(&f.PriceHistory, "price-history", "", "how long superseded prices stay available to as-of lookups, event time (default 10m)")
	fl.StringVar(&f.CartTTL, "cart-ttl", "", "expire cart lines this long after their last change, event time (default 30m)")
	fl.StringVar(&f.CartTotalsEvery, "cart-totals-every", "", "emit each cart's total at most once per this much event time (default 1s)")
	fl.StringVar(&f.LogLevel, "log-level", f.LogLevel, "debug, info, warn or error")
	addHAFlags(fl, &f.haConfig)
	sec := &f.Security
	fl.BoolVar(&sec.TLS.Enabled, "tls", false, "connect to the brokers over TLS")
	fl.StringVar(&sec.TLS.CAFile, "tls-ca-file", "", "PEM file of the CAs that sign the brokers' certificates (default: the system roots)")
	fl.StringVar(&sec.TLS.CertFile, "tls-cert-file", "", "PEM client certificate, for brokers that require one (mutual TLS)")
	fl.StringVar(&sec.TLS.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fl.StringVar(&sec.TLS.ServerName, "tls-server-name", "", "name the brokers' certificates must carry (default: the broker host)")
	fl.BoolVar(&sec.TLS.InsecureSkipVerify, "tls-insecure-skip-verify", false, "accept any broker certificate: for tests only")
	fl.StringVar(&sec.SASL.Mechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	fl.StringVar(&sec.SASL.Username, "sasl-username", "", "SASL user name")
	fl.StringVar(&sec.SASL.PasswordEnv, "sasl-password-env", "", "environment variable holding the SASL password")
	fl.StringVar(&sec.SASL.PasswordFile, "sasl-password-file", "", "file holding the SASL password")
}

// resolveServiceConfig layers defaults, the file, the environment and the
// flags the user set. fromFlags holds defaults and flag values; only
// flags marked Changed override.
func resolveServiceConfig(path string, getenv func(string) string, fl *pflag.FlagSet, fromFlags serviceConfig) (serviceConfig, error) {
	cfg := defaultServiceConfig()
	if path == "" {
		path = getenv("TIDEMARK_CONFIG")
	}
	if path != "" {
		if err := loadConfigFile(path, &cfg); err != nil {
			return cfg, err
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return cfg, fmt.Errorf("environment: %w", err)
	}
	set := func(name string, apply func()) {
		if fl != nil && fl.Changed(name) {
			apply()
		}
	}
	f := fromFlags
	set("application", func() { cfg.Application = f.Application })
	set("brokers", func() { cfg.Brokers = f.Brokers })
	set("state-dir", func() { cfg.StateDir = f.StateDir })
	set("http", func() { cfg.HTTP = f.HTTP })
	set("advertised-http", func() { cfg.AdvertisedHTTP = f.AdvertisedHTTP })
	set("instance-id", func() { cfg.InstanceID = f.InstanceID })
	set("pipelines", func() { cfg.Pipelines = f.Pipelines })
	set("guarantee", func() { cfg.Guarantee = f.Guarantee })
	set("commit-policy", func() { cfg.CommitPolicy = f.CommitPolicy })
	set("commit-interval", func() { cfg.CommitInterval = f.CommitInterval })
	set("staleness-target", func() { cfg.StalenessTarget = f.StalenessTarget })
	set("dead-letter-topic", func() { cfg.DeadLetterTopic = f.DeadLetterTopic })
	set("skip-undecodable", func() { cfg.SkipUndecodable = f.SkipUndecodable })
	set("topic-prefix", func() { cfg.TopicPrefix = f.TopicPrefix })
	set("create-topics", func() { cfg.CreateTopics = f.CreateTopics })
	set("standby-replicas", func() { cfg.StandbyReplicas = f.StandbyReplicas })
	set("acceptable-recovery-lag", func() { cfg.AcceptableRecoveryLag = f.AcceptableRecoveryLag })
	set("max-warmup-replicas", func() { cfg.MaxWarmupReplicas = f.MaxWarmupReplicas })
	set("probing-rebalance-interval", func() { cfg.ProbingRebalanceInterval = f.ProbingRebalanceInterval })
	set("snapshot-store", func() { cfg.SnapshotStore = f.SnapshotStore })
	set("max-records-per-task-pass", func() { cfg.MaxRecordsPerTaskPass = f.MaxRecordsPerTaskPass })
	set("threads", func() { cfg.Threads = f.Threads })
	set("peer-dead-after", func() { cfg.PeerDeadAfter = f.PeerDeadAfter })
	set("liveness-timeout", func() { cfg.LivenessTimeout = f.LivenessTimeout })
	set("restore-share", func() { cfg.RestoreShare = f.RestoreShare })
	set("partitions", func() { cfg.Partitions = f.Partitions })
	set("fraud-threshold", func() { cfg.FraudThreshold = f.FraudThreshold })
	set("ship-within", func() { cfg.ShipWithin = f.ShipWithin })
	set("grace", func() { cfg.Grace = f.Grace })
	set("price-history", func() { cfg.PriceHistory = f.PriceHistory })
	set("cart-ttl", func() { cfg.CartTTL = f.CartTTL })
	set("cart-totals-every", func() { cfg.CartTotalsEvery = f.CartTotalsEvery })
	set("log-level", func() { cfg.LogLevel = f.LogLevel })
	set("tls", func() { cfg.Security.TLS.Enabled = f.Security.TLS.Enabled })
	set("tls-ca-file", func() { cfg.Security.TLS.CAFile = f.Security.TLS.CAFile })
	set("tls-cert-file", func() { cfg.Security.TLS.CertFile = f.Security.TLS.CertFile })
	set("tls-key-file", func() { cfg.Security.TLS.KeyFile = f.Security.TLS.KeyFile })
	set("tls-server-name", func() { cfg.Security.TLS.ServerName = f.Security.TLS.ServerName })
	set("tls-insecure-skip-verify", func() { cfg.Security.TLS.InsecureSkipVerify = f.Security.TLS.InsecureSkipVerify })
	set("sasl-mechanism", func() { cfg.Security.SASL.Mechanism = f.Security.SASL.Mechanism })
	set("sasl-username", func() { cfg.Security.SASL.Username = f.Security.SASL.Username })
	// A password source given by flag replaces the file's, rather than
	// clash with it.
	set("sasl-password-env", func() {
		cfg.Security.SASL.Password, cfg.Security.SASL.PasswordFile, cfg.Security.SASL.PasswordEnv = "", "", f.Security.SASL.PasswordEnv
	})
	set("sasl-password-file", func() {
		cfg.Security.SASL.Password, cfg.Security.SASL.PasswordEnv, cfg.Security.SASL.PasswordFile = "", "", f.Security.SASL.PasswordFile
	})
	return cfg, nil
}

// logger is the service's logger at its log_level, writing to logw.
func (s *service) logger(logw io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.cfg.LogLevel))
	return slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level}))
}

// topology builds the topology of the configured pipelines.
func (s *service) topology() (*topology.Topology, error) {
	return pipelines.Build(s.cfg.Application, s.names, s.pipelines)
}

// app builds the topology and the App the service runs.
func (s *service) app(logw io.Writer) (*processor.App, error) {
	log := s.logger(logw)
	topo, err := s.topology()
	if err != nil {
		return nil, err
	}
	opts := []processor.Option{
		processor.WithBrokers(s.cfg.Brokers...),
		processor.WithStateDir(filepath.Join(s.cfg.StateDir, s.cfg.Application)),
		processor.WithHTTP(s.cfg.HTTP),
		processor.WithGuarantee(s.guarantee),
		processor.WithCommitPolicy(s.commit),
		processor.WithLogger(log),
		processor.WithSecurity(s.cfg.Security),
	}
	if s.cfg.InstanceID != "" {
		opts = append(opts, processor.WithInstanceID(s.cfg.InstanceID))
	}
	if s.cfg.DeadLetterTopic != "" {
		opts = append(opts, processor.WithDeadLetterTopic(s.cfg.DeadLetterTopic))
	}
	if adv := s.cfg.AdvertisedHTTP; adv != "" {
		opts = append(opts, processor.WithAdvertisedHTTP(adv))
	}
	opts = append(opts, s.cfg.haConfig.options()...)
	return processor.NewApp(topo, opts...)
}

// run creates topics if asked and runs the App (or the apps: list's Apps)
// until ctx is cancelled.
func (s *service) run(ctx context.Context, logw io.Writer) error {
	if len(s.apps) > 0 {
		return runApps(ctx, s.apps, logw)
	}
	app, err := s.app(logw)
	if err != nil {
		return err
	}
	if s.cfg.CreateTopics {
		if err := s.preflight(app); err != nil {
			return err
		}
	}
	if err := s.createTopics(ctx, s.logger(logw)); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // stopped before it started
	}
	if err := app.Run(ctx); err != nil {
		return fmt.Errorf("run: %w", s.cfg.runHint(err))
	}
	return nil
}

// createTopicsTimeout bounds how long --create-topics waits for a broker
// that is still starting (or a leader election): the App's default
// StartupTimeout, which the run without --create-topics waits.
const createTopicsTimeout = 60 * time.Second

// createTopics creates the pipelines' topics when create_topics is set,
// retrying transient errors (a broker that refuses connections while it
// starts) for up to createTopicsTimeout. A cancelled ctx (SIGTERM while
// it waits) is a clean stop, not an error.
func (s *service) createTopics(ctx context.Context, log *slog.Logger) error {
	if s.cfg.CreateTopics {
		topics, err := pipelines.Topics(s.names, s.pipelines)
		if err != nil {
			return err
		}
		if s.cfg.DeadLetterTopic != "" {
			topics = append(topics, s.cfg.DeadLetterTopic)
		}
		sec, err := s.cfg.Security.ClientOpts()
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, sec...)...)
		if err != nil {
			return fmt.Errorf("run: admin client: %w", err)
		}
		adm := kadm.NewClient(cl)
		cctx, cancel := context.WithTimeout(ctx, createTopicsTimeout)
		err = retry.Do(cctx, log, "create topics", func(ctx context.Context) error {
			return ensureTopics(ctx, adm, topics, s.cfg.Partitions)
		})
		cancel()
		cl.Close()
		if err != nil && ctx.Err() != nil {
			return nil // stopped while waiting: the App's Run ends at once too
		}
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	return nil
}
