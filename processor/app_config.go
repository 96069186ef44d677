package processor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/security"
	"github.com/tidemark-streams/tidemark/txn"
)

// Guarantee is the processing guarantee of an App.
type Guarantee int

const (
	// ExactlyOnce commits outputs, changelog records and input offsets in
	// one Kafka transaction (EOS v2). Outputs are visible to read_committed
	// consumers when the transaction commits.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce produces without transactions and commits offsets after
	// the outputs are acknowledged: a crash can repeat work, never lose it.
	AtLeastOnce
)

func (g Guarantee) String() string {
	if g == AtLeastOnce {
		return "at_least_once"
	}
	return "exactly_once"
}

// ParseGuarantee reads "exactly_once" or "at_least_once".
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "exactly_once", "exactly-once", "eos":
		return ExactlyOnce, nil
	case "at_least_once", "at-least-once", "alos":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("guarantee %q: want exactly_once or at_least_once", s)
}

// OnDeserializationError says what a task does with a record its source
// cannot decode.
type OnDeserializationError int

const (
	// FailOnDeserializationError stops the app with an error naming the
	// record; nothing is skipped silently.
	FailOnDeserializationError OnDeserializationError = iota
	// DeadLetterOnDeserializationError writes the raw record to
	// Config.DeadLetterTopic, inside the transaction, with headers naming
	// the error, source topic, partition and offset, and goes on. A
	// global table's undecodable record is skipped and logged instead:
	// every instance reads it.
	DeadLetterOnDeserializationError
)

// Config configures an App. Zero fields stand for the defaults documented
// on each. NewApp takes functional options (WithBrokers, WithStateDir, ...);
// a Config loaded from a file or flags enters through WithConfig, first.
// EnsureDefaults fills the defaults in and Validate checks the result,
// naming the field at fault; NewApp does both.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// StateDir is this instance's state directory (Badger, the instance
	// id), used as given: it is not a parent directory. Each instance of
	// an application needs its own. Default tidemark-state/<application>,
	// relative to the working directory; `tidemark run --state-dir D` uses
	// D/<application>, so both default to the same place.
	StateDir string
	// InstanceID names this process in the group, in its transactional id
	// and in query redirects. It must be stable across restarts of the same
	// instance: a restarted producer with the same transactional id aborts
	// the transaction its crashed predecessor left open at once, instead of
	// blocking read_committed consumers until the transaction times out.
	// Default: read from (or created in) StateDir/instance-id.
	InstanceID string
	// Guarantee is the processing guarantee. Default ExactlyOnce.
	Guarantee Guarantee
	// Commit configures the frontier controller that picks the commit
	// cadence. Nil means a zero frontier.Options: the adaptive policy with
	// frontier's defaults (frontier.DefaultOptions() spells them out).
	// Zero fields of a non-nil Commit take those defaults too.
	Commit *frontier.Options
	// Checkpoint configures the checkpoint scheduler (Daly's rule with a
	// restore-time cap; its MeanTimeBetweenFailures is the prior of the
	// failure hazard the App learns, app_hazard.go). Zero fields take
	// frontier's defaults.
	Checkpoint frontier.CheckpointOptions
	// Snapshots configures snapshots to a blob store (app_snapshot.go).
	Snapshots SnapshotConfig
	// TransactionTimeout is the broker-side timeout of a transaction; it
	// must exceed the longest commit interval with room for the commit
	// itself (at least Commit.MaxInterval + 5s). It bounds how long a
	// transaction left open by a member that dies and never comes back can
	// hold back read_committed readers when nothing fences it sooner
	// (members fence departed members' transactions when partitions move).
	// Default 10s, as Kafka Streams under exactly-once.
	TransactionTimeout time.Duration
	// SessionTimeout and RebalanceTimeout of the consumer group. Defaults
	// 10s and 30s. Members are static (KIP-345): a member that dies keeps
	// its partitions until SessionTimeout passes, unless it restarts first.
	SessionTimeout, RebalanceTimeout time.Duration
	// StartupTimeout bounds how long Run keeps trying to reach the
	// cluster at start (a broker that is still starting, a rolling
	// restart) before it fails naming the brokers. Once running, the
	// service rides through broker outages without a limit. Default 60s.
	StartupTimeout time.Duration
	// IdleTimeout is how long an input partition that has caught up (its
	// position at its last stable offset, or that offset standing still)
	// must go without a record before the output frontier stops waiting for
	// it, like Kafka Streams' max.task.idle.ms: its task then follows the
	// other tasks of its sinks, and records that later arrive on it at or
	// below the task's published watermark are late for the frontier.
	// A partition that never had a record holds the frontier back for one
	// timeout. Negative: never idle. Default 5s.
	IdleTimeout time.Duration
	// RepartitionPurgeInterval is how often the records of the
	// repartition topics this instance consumes are deleted (DeleteRecords)
	// below the offsets its committed transactions consumed them to, like
	// Kafka Streams' repartition.purge.interval.ms. Repartition topics keep
	// retention.ms=-1: purging is what bounds them. Offsets of aborted
	// transactions are never purged. Negative: never purge. Default 30s.
	RepartitionPurgeInterval time.Duration
	// HTTPAddr serves /metrics, /healthz, /readyz, /frontier, the web
	// view (/ui) and interactive queries. Empty disables it.
	HTTPAddr string
	// AdvertisedHTTP is the address other instances give clients for keys
	// this instance owns. Default HTTPAddr.
	AdvertisedHTTP string
	// PeerDeadAfter: instances that serve HTTP dial each other's
	// AdvertisedHTTP, and remove from the group an instance whose every
	// dial was refused for this long (its process is gone), so its
	// partitions move now rather than after SessionTimeout (app_peers.go).
	// At least 100ms. Negative: off. Default DefaultPeerDeadAfter.
	PeerDeadAfter time.Duration
	// LivenessTimeout: a stream thread whose record loop has not turned
	// for this long is stuck (a call that never returns: user code, a
	// disk that turned read-only under Badger); GET /healthz then answers
	// 503, so a liveness probe restarts the process, and the log shows
	// every goroutine's stack (app_liveness.go). Negative: off. Default
	// DefaultLivenessTimeout.
	LivenessTimeout time.Duration
	// OnDeserializationError and DeadLetterTopic: see their types.
	OnDeserializationError OnDeserializationError
	DeadLetterTopic        string
	// OnProcessingError decides for a record whose processing fails in a
	// user function (an error or a panic). Default: fail the app.
	OnProcessingError ProcessingErrorHandler
	// OnProductionError decides for a record whose output the broker
	// rejects for good, after ProductionRetries attempts. Default: fail.
	OnProductionError ProductionErrorHandler
	// ProductionRetries is how many times a transaction with a rejected
	// output is redone (with growing pauses) before OnProductionError
	// decides. Default 3.
	ProductionRetries int
	// State sizes the Badger DB. The zero value takes changelog's defaults
	// (a 128 MiB memory budget).
	State changelog.Options
	// PollRecords caps the records taken per poll. Default 10000.
	PollRecords int
	// MaxRecordsPerTaskPass is the most records of one task a pass of the
	// record loop processes before moving on, so a backlogged task cannot
	// hold back the others' outputs and commits (app_fair.go). Default
	// DefaultMaxRecordsPerTaskPass; UnlimitedRecordsPerTaskPass turns it off.
	MaxRecordsPerTaskPass int
	// OffsetMetadataMaxBytes is the brokers' offset.metadata.max.bytes:
	// the longest offset commit metadata they accept. Every commit
	// carries the task's clocks and changelog positions there, and NewApp
	// refuses a topology whose worst case would not fit (a commit over it
	// would abort every transaction). Raise it only together with the
	// brokers' setting. Default 4096, the brokers' default.
	OffsetMetadataMaxBytes int
	// PublishFrontier writes the output frontier to the compacted
	// "<application>-frontier" topic in every transaction. Default on.
	PublishFrontier *bool
	// Logger receives the App's structured logs: start-up, assignments,
	// restores, rebuilds, fenced sessions, slow commits, dropped records
	// (rate-limited), with the task and partition as attributes. Default
	// slog.Default().
	Logger *slog.Logger
	// PipelinedCommits: the record loop keeps processing while a
	// transaction ends, staging the next one's outputs (app_pipeline.go).
	// Exactly-once only. Nil: the default, on (see WithPipelinedCommits).
	PipelinedCommits *bool
	// PipelineBudget is the bytes of output records staged while a
	// transaction ends before the loop waits for it. Default
	// DefaultPipelineBudget.
	PipelineBudget int
	// wrapTransactor, set by tests only, wraps each session's transactor
	// (to inject an abort into End, app_pipeline_internal_test.go).
	wrapTransactor func(txn.Transactor) txn.Transactor
	// sessionHook, set by tests only, sees each session when it is made
	// (to call its group callbacks as the client would).
	sessionHook func(*session)
	// FaultHook is called at each step of every commit (txn.Point); crash
	// tests kill the process there. Nil in production.
	FaultHook func(txn.Point)
	// RestoreListener hears of every task's changelog restores, on the
	// restoring goroutine (see RestoreListener). Nil: none.
	RestoreListener RestoreListener
	// RestoreShare is the most of one core's time that restores, standbys
	// catching up, snapshot loads and snapshot writes, all together, may
	// take while this instance has running tasks: they sleep the rest, so
	// the running tasks' records keep the CPU they need (app_pace.go).
	// In (0, 1]; 1: never throttled.
	// Default DefaultRestoreShare.
	RestoreShare float64
	// StandbyReplicas is how many standby copies of each stateful task
	// the group keeps on other instances, caught up from the changelogs,
	// so that a failover restores only the tail (standby.go). Default 0.
	StandbyReplicas int
	// AcceptableRecoveryLag is the changelog lag (records) under which an
	// instance counts as caught up for a task: the group assigns an
	// active task only to a caught-up instance when one exists, and warms
	// up the others first (KIP-441). Default 10,000.
	AcceptableRecoveryLag int64
	// MaxWarmupReplicas is how many warm-ups (standbys catching up to take
	// a task over) the group runs at once, Kafka Streams'
	// max.warmup.replicas: it bounds the restore traffic of a scale-out.
	// Default 2.
	MaxWarmupReplicas int
	// ProbingRebalanceInterval is how often an instance warming up tasks
	// forces a rebalance so the leader sees its lags. Default 10 min.
	ProbingRebalanceInterval time.Duration
	// Security is the TLS and SASL setting of every franz-go client the
	// app creates (the group session, admin, restore, fencing and
	// frontier clients). The zero value is plaintext without
	// authentication. Validate reads the files it names.
	Security security.Config
	// ClientOpts are appended to every franz-go client the app creates,
	// after Security's options.
	ClientOpts []kgo.Opt

	// Threads is how many stream threads (record loops) the App runs,
	// each its own group member ("<InstanceID>-t<i>") with its own
	// transactional producer (app_threads.go). Default DefaultThreads.
	Threads int
	// PinnedPartitions are the partition numbers whose tasks run on one
	// stream thread of each process, apart from the other tasks
	// (app_threads_pin.go). Default (nil): the partitions the topology's
	// placements dedicate to hot tenants; empty: none.
	PinnedPartitions []int32

	persistedID bool // InstanceID lives in StateDir/instance-id

	// Set while NewApp applies options: the option's index, and an option's
	// error (WithConfig after another option).
	optionIndex int
	optionErr   error
}

// Option sets Config fields: processor.NewApp(topo, processor.WithBrokers(...)).
// Options apply in order; WithConfig, when used, must come first.
type Option func(*Config)

func WithBrokers(brokers ...string) Option  { return func(c *Config) { c.Brokers = brokers } }
func WithStateDir(dir string) Option        { return func(c *Config) { c.StateDir = dir } }
func WithInstanceID(id string) Option       { return func(c *Config) { c.InstanceID = id } }
func WithGuarantee(g Guarantee) Option      { return func(c *Config) { c.Guarantee = g } }
func WithHTTP(addr string) Option           { return func(c *Config) { c.HTTPAddr = addr } }
func WithLogger(l *slog.Logger) Option      { return func(c *Config) { c.Logger = l } }
func WithClientOpts(opts ...kgo.Opt) Option { return func(c *Config) { c.ClientOpts = opts } }

// WithSecurity sets Config.Security.
func WithSecurity(s security.Config) Option { return func(c *Config) { c.Security = s } }

// WithIdleTimeout sets Config.IdleTimeout.
func WithIdleTimeout(d time.Duration) Option { return func(c *Config) { c.IdleTimeout = d } }

// WithRepartitionPurgeInterval sets Config.RepartitionPurgeInterval.
func WithRepartitionPurgeInterval(d time.Duration) Option {
	return func(c *Config) { c.RepartitionPurgeInterval = d }
}

// WithCommitPolicy configures the frontier controller.
func WithCommitPolicy(o frontier.Options) Option { return func(c *Config) { c.Commit = &o } }

// WithDeadLetterTopic sends undecodable records to topic instead of failing.
func WithDeadLetterTopic(topic string) Option {
	return func(c *Config) {
		c.DeadLetterTopic = topic
		c.OnDeserializationError = DeadLetterOnDeserializationError
	}
}

// WithFaultHook installs Config.FaultHook.
func WithFaultHook(fn func(txn.Point)) Option { return func(c *Config) { c.FaultHook = fn } }

// WithAdvertisedHTTP sets Config.AdvertisedHTTP.
func WithAdvertisedHTTP(addr string) Option { return func(c *Config) { c.AdvertisedHTTP = addr } }

// WithOffsetMetadataMaxBytes tells the App the brokers' raised
// offset.metadata.max.bytes (Config.OffsetMetadataMaxBytes).
func WithOffsetMetadataMaxBytes(n int) Option {
	return func(c *Config) { c.OffsetMetadataMaxBytes = n }
}

// WithConfig starts from cfg, for configs loaded from files and flags; the
// options after it override its fields. It must be the first option: after
// another one NewApp fails, rather than let cfg silently replace what that
// option set.
func WithConfig(cfg Config) Option {
	return func(c *Config) {
		if c.optionIndex > 0 {
			c.optionErr = fmt.Errorf("WithConfig is option %d: it must be the first option, or it would replace what the options before it set", c.optionIndex+1)
			return
		}
		cfg.persistedID, cfg.optionIndex, cfg.optionErr = false, c.optionIndex, nil
		*c = cfg
	}
}

// newConfig applies opts to a zero Config, in order.
func newConfig(opts []Option) (Config, error) {
	var c Config
	for i, o := range opts {
		c.optionIndex = i
		o(&c)
		if c.optionErr != nil {
			return Config{}, c.optionErr
		}
	}
	c.optionIndex = 0
	return c, nil
}

// instanceID returns the configured id, or the one persisted in the state
// directory, choosing one on first start (openState persists it).
func (c *Config) instanceID() (string, error) {
	if c.InstanceID != "" {
		return c.InstanceID, nil
	}
	c.persistedID = true
	path := filepath.Join(c.StateDir, "instance-id")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		id := strings.TrimSpace(string(b))
		err := validInstanceID(id, c.threadCount())
		if err == nil {
			return id, nil
		}
		// A damaged file must not crash-loop the service: a new id only
		// costs a rebalance, and the old id's open transaction, if any,
		// is fenced as a departed member's.
		c.Logger.Warn("the persisted instance id is unusable; choosing a new one", "file", path, "err", err)
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if validInstanceID(string(r), 1) != nil {
			return '-'
		}
		return r
	}, host)
	var b [4]byte
	_, _ = rand.Read(b[:])
	// Written by openState, once the state directory is open: a start
	// that fails before (a missing topic) leaves no directory behind.
	return fmt.Sprintf("%s-%s", host[:min(len(host), 200)], hex.EncodeToString(b[:])), nil
}

// CheckInstanceID reports whether id can be WithInstanceID's id of an App
// with the given number of stream threads (WithThreads; 0 for the
// default), so a configuration layer can name its own field for a bad one
// before it builds the App.
func CheckInstanceID(id string, threads int) error {
	if threads <= 0 {
		threads = DefaultThreads
	}
	return validInstanceID(id, threads)
}

// validInstanceID checks an instance id against what Kafka accepts for a
// group instance id (the characters of a topic name, at most 249), which
// also keeps '/' out of the transactional id it is part of. With several
// stream threads the longest of their group instance ids
// ("<id>-t<threads-1>") must fit too.
func validInstanceID(id string, threads int) error {
	const maxLen = 249
	if id == "" || len(id) > maxLen {
		return fmt.Errorf("instance id of %d bytes: want 1 to %d", len(id), maxLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("instance id %q: only ASCII letters, digits, '.', '_' and '-' are allowed", id)
		}
	}
	if longest := threadInstanceID(id, threads-1, threads); len(longest) > maxLen {
		return fmt.Errorf("instance id of %d bytes: with %d stream threads the group instance id of the last, %q, has %d bytes, over Kafka's %d: want at most %d",
			len(id), threads, "…"+longest[len(id)-min(len(id), 8):], len(longest), maxLen, maxLen-(len(longest)-len(id)))
	}
	return nil
}

// EnsureDefaults sets every zero field to its documented default and
// returns c; app is the application id, which names the default StateDir.
// It checks nothing (see Validate), and copies Commit rather than fill in
// the caller's frontier.Options.
func (c *Config) EnsureDefaults(app string) *Config {
	if c.StateDir == "" {
		c.StateDir = filepath.Join("tidemark-state", app)
	}
	commit := frontier.Options{}
	if c.Commit != nil {
		commit = *c.Commit
	}
	c.Commit = commit.EnsureDefaults()
	c.Checkpoint.EnsureDefaults()
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Second
	}
	if c.RepartitionPurgeInterval == 0 {
		c.RepartitionPurgeInterval = 30 * time.Second
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = 60 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 30 * time.Second
	}
	if c.ProductionRetries == 0 {
		c.ProductionRetries = 3
	}
	if c.PollRecords == 0 {
		c.PollRecords = 10_000
	}
	if c.MaxRecordsPerTaskPass == 0 {
		c.MaxRecordsPerTaskPass = DefaultMaxRecordsPerTaskPass
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = offsetMetaBrokerDefault
	}
	if c.PublishFrontier == nil {
		on := true
		c.PublishFrontier = &on
	}
	c.ensureStandbyDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.AdvertisedHTTP == "" {
		c.AdvertisedHTTP = c.HTTPAddr
	}
	if c.PeerDeadAfter == 0 {
		c.PeerDeadAfter = DefaultPeerDeadAfter
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = DefaultLivenessTimeout
	}
	if c.RestoreShare == 0 {
		c.RestoreShare = DefaultRestoreShare
	}
	return c
}

// Validate checks c as NewApp would use it, zero fields standing for their
// defaults, and names the field at fault and what it accepts. It does not
// modify c.
func (c *Config) Validate() error {
	d := *c
	d.EnsureDefaults("app")
	if len(d.Brokers) == 0 {
		return errors.New("config: Brokers is required")
	}
	if err := d.Commit.Validate(); err != nil {
		return fmt.Errorf("config: Commit: %w", err)
	}
	if err := d.Checkpoint.Validate(); err != nil {
		return fmt.Errorf("config: Checkpoint: %w", err)
	}
	if d.ProductionRetries < 1 {
		return fmt.Errorf("config: ProductionRetries %d must be ≥ 1", d.ProductionRetries)
	}
	// The broker aborts a transaction open longer than its timeout; the
	// longest interval the controller may choose plus a slow commit must
	// fit, or every long interval would end in a fenced producer.
	if longest := d.Commit.MaxInterval + 5*time.Second; d.Guarantee == ExactlyOnce && d.TransactionTimeout < longest {
		return fmt.Errorf("config: TransactionTimeout %s must be at least the longest commit interval %s plus 5s", d.TransactionTimeout, d.Commit.MaxInterval)
	}
	if d.InstanceID != "" {
		if err := validInstanceID(d.InstanceID, d.threadCount()); err != nil {
			return fmt.Errorf("config: InstanceID: %w", err)
		}
	}
	if d.OnDeserializationError == DeadLetterOnDeserializationError && d.DeadLetterTopic == "" {
		return errors.New("config: DeadLetterTopic is required when OnDeserializationError is dead-letter")
	}
	if d.OffsetMetadataMaxBytes < 0 {
		return fmt.Errorf("config: OffsetMetadataMaxBytes %d must be ≥ 0 (0: the brokers' default, %d)", d.OffsetMetadataMaxBytes, offsetMetaBrokerDefault)
	}
	if d.PollRecords < 1 {
		return fmt.Errorf("config: PollRecords %d must be ≥ 1", d.PollRecords)
	}
	if err := checkPipelineBudget(d.PipelineBudget); err != nil {
		return err
	}
	if err := checkMaxRecordsPerTaskPass(d.MaxRecordsPerTaskPass); err != nil {
		return err
	}
	if err := d.validateStandby(); err != nil {
		return err
	}
	if err := checkThreads(d.Threads); err != nil {
		return err
	}
	if err := checkPeerDeadAfter(d.PeerDeadAfter); err != nil {
		return err
	}
	if d.LivenessTimeout > 0 && d.LivenessTimeout < MinLivenessTimeout {
		return fmt.Errorf("config: LivenessTimeout %s must be at least %s (negative turns the check off)", d.LivenessTimeout, MinLivenessTimeout)
	}
	if d.RestoreShare < 0 || d.RestoreShare > 1 {
		return fmt.Errorf("config: RestoreShare %g must be in (0, 1] (0 takes the default %g)", d.RestoreShare, DefaultRestoreShare)
	}
	if err := d.Security.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}
