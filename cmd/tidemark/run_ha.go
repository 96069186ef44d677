package main

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"gocloud.dev/blob"

	"github.com/tidemark-streams/tidemark/processor"
)

// haConfig is the part of serviceConfig about recovery and scheduling:
// standby replicas and warm-ups, the snapshot store, fair scheduling. The
// zero value keeps processor's defaults (no standbys, warm-ups on with
// Kafka Streams' acceptable recovery lag, no snapshots, 500 records per
// task per pass).
type haConfig struct {
	StandbyReplicas       int    `yaml:"standby_replicas" json:"standby_replicas"`
	AcceptableRecoveryLag int64  `yaml:"acceptable_recovery_lag" json:"acceptable_recovery_lag"`
	SnapshotStore         string `yaml:"snapshot_store" json:"snapshot_store"`
	// MaxWarmupReplicas is processor.WithMaxWarmupReplicas; 0 keeps its
	// default.
	MaxWarmupReplicas int `yaml:"max_warmup_replicas" json:"max_warmup_replicas"`
	// ProbingRebalanceInterval is processor.WithProbingRebalanceInterval,
	// a Go duration; empty keeps its default.
	ProbingRebalanceInterval string `yaml:"probing_rebalance_interval" json:"probing_rebalance_interval"`
	// MaxRecordsPerTaskPass: 0 keeps the default, -1 turns fair
	// scheduling off (processor.UnlimitedRecordsPerTaskPass).
	MaxRecordsPerTaskPass int `yaml:"max_records_per_task_pass" json:"max_records_per_task_pass"`
	// Threads is processor.WithThreads: record loops (group members) in
	// this process; 0 keeps processor.DefaultThreads.
	Threads int `yaml:"threads" json:"threads"`
	// PeerDeadAfter is processor.WithPeerDeadAfter: a Go duration, or
	// "off"; empty keeps processor.DefaultPeerDeadAfter.
	PeerDeadAfter string `yaml:"peer_dead_after" json:"peer_dead_after"`
	// LivenessTimeout is processor.WithLivenessTimeout: a Go duration, or
	// "off"; empty keeps processor.DefaultLivenessTimeout.
	LivenessTimeout string `yaml:"liveness_timeout" json:"liveness_timeout"`
	// RestoreShare is processor.WithRestoreShare; 0 keeps
	// processor.DefaultRestoreShare.
	RestoreShare float64 `yaml:"restore_share" json:"restore_share"`
}

func addHAFlags(fl *pflag.FlagSet, f *haConfig) {
	fl.IntVar(&f.StandbyReplicas, "standby-replicas", 0, "standby replicas per stateful task, kept warm on other instances for fast failover")
	fl.Int64Var(&f.AcceptableRecoveryLag, "acceptable-recovery-lag", 0, "changelog records an instance may lag and still take a task at once; more and it warms up first (default 10000)")
	fl.IntVar(&f.MaxWarmupReplicas, "max-warmup-replicas", 0, "warm-ups (copies catching up to take a task over) the group runs at once (default 2)")
	fl.StringVar(&f.ProbingRebalanceInterval, "probing-rebalance-interval", "", "how often an instance warming up tasks asks for a rebalance so the leader sees its lags (default 10m)")
	fl.StringVar(&f.SnapshotStore, "snapshot-store", "", "blob store URL for task snapshots, e.g. file:///var/lib/tidemark-snapshots (shared by every instance)")
	fl.IntVar(&f.Threads, "threads", 0, "record loops in this process, each its own group member with its own transactional producer (default 1)")
	fl.StringVar(&f.PeerDeadAfter, "peer-dead-after", "", "remove an instance from the group once its HTTP port has refused connections this long, so its partitions move before its session times out; \"off\" to wait for the session timeout (default 500ms; needs --http)")
	fl.StringVar(&f.LivenessTimeout, "liveness-timeout", "", "GET /healthz answers 503 once a record loop has not turned for this long (stuck in a call that never returns), so a liveness probe restarts the process; \"off\" never (default 5m)")
	fl.Float64Var(&f.RestoreShare, "restore-share", 0, "most of its time a restore, standby catch-up or snapshot load may work while this instance runs tasks, in (0, 1]; 1: unpaced (default 0.5)")
	fl.IntVar(&f.MaxRecordsPerTaskPass, "max-records-per-task-pass", 0, "records of one task per record-loop pass, so a backlogged task cannot starve the others (default 500; -1: off)")
}

// applyHAEnv reads TIDEMARK_STANDBY_REPLICAS, TIDEMARK_ACCEPTABLE_RECOVERY_LAG,
// TIDEMARK_SNAPSHOT_STORE, TIDEMARK_MAX_RECORDS_PER_TASK_PASS, TIDEMARK_THREADS
// TIDEMARK_PEER_DEAD_AFTER, TIDEMARK_LIVENESS_TIMEOUT, TIDEMARK_RESTORE_SHARE,
// TIDEMARK_MAX_WARMUP_REPLICAS and TIDEMARK_PROBING_REBALANCE_INTERVAL.
func applyHAEnv(f *haConfig, getenv func(string) string) error {
	if v := getenv("TIDEMARK_SNAPSHOT_STORE"); v != "" {
		f.SnapshotStore = v
	}
	if v := getenv("TIDEMARK_PROBING_REBALANCE_INTERVAL"); v != "" {
		f.ProbingRebalanceInterval = v
	}
	if v := getenv("TIDEMARK_PEER_DEAD_AFTER"); v != "" {
		f.PeerDeadAfter = v
	}
	if v := getenv("TIDEMARK_LIVENESS_TIMEOUT"); v != "" {
		f.LivenessTimeout = v
	}
	if v := getenv("TIDEMARK_RESTORE_SHARE"); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("TIDEMARK_RESTORE_SHARE=%q: want a number in (0, 1]", v)
		}
		f.RestoreShare = x
	}
	for name, dst := range map[string]*int{"TIDEMARK_STANDBY_REPLICAS": &f.StandbyReplicas, "TIDEMARK_MAX_RECORDS_PER_TASK_PASS": &f.MaxRecordsPerTaskPass, "TIDEMARK_THREADS": &f.Threads,
		"TIDEMARK_MAX_WARMUP_REPLICAS": &f.MaxWarmupReplicas} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want an integer", name, v)
			}
			*dst = n
		}
	}
	if v := getenv("TIDEMARK_ACCEPTABLE_RECOVERY_LAG"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("TIDEMARK_ACCEPTABLE_RECOVERY_LAG=%q: want an integer", v)
		}
		f.AcceptableRecoveryLag = n
	}
	return nil
}

// validate names the field at fault. The snapshot store's scheme must be
// one this binary links (file:// and mem://; S3 and GCS need a build with
// gocloud's s3blob or gcsblob imported), checked now rather than at the
// first checkpoint.
func (f haConfig) validate() error {
	if f.StandbyReplicas < 0 {
		return fmt.Errorf("config: standby_replicas %d: must not be negative", f.StandbyReplicas)
	}
	if f.Threads < 0 || f.Threads > 64 {
		return fmt.Errorf("config: threads %d: accepted range 1..64 (0: the default)", f.Threads)
	}
	if f.AcceptableRecoveryLag < 0 {
		return fmt.Errorf("config: acceptable_recovery_lag %d: must not be negative", f.AcceptableRecoveryLag)
	}
	if f.MaxWarmupReplicas < 0 {
		return fmt.Errorf("config: max_warmup_replicas %d: must not be negative (0: the default)", f.MaxWarmupReplicas)
	}
	if _, err := f.probingRebalanceInterval(); err != nil {
		return err
	}
	if f.MaxRecordsPerTaskPass < processor.UnlimitedRecordsPerTaskPass {
		return fmt.Errorf("config: max_records_per_task_pass %d: want ≥ 1, 0 for the default or -1 for no limit", f.MaxRecordsPerTaskPass)
	}
	if _, err := f.peerDeadAfter(); err != nil {
		return err
	}
	if _, err := f.livenessTimeout(); err != nil {
		return err
	}
	if f.RestoreShare < 0 || f.RestoreShare > 1 {
		return fmt.Errorf("config: restore_share %g: want a share in (0, 1] (0: the default)", f.RestoreShare)
	}
	if f.SnapshotStore != "" {
		u, err := url.Parse(f.SnapshotStore)
		if err != nil || u.Scheme == "" {
			return fmt.Errorf("config: snapshot_store %q: want a blob store URL such as file:///var/lib/tidemark-snapshots", f.SnapshotStore)
		}
		if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
			return fmt.Errorf("config: snapshot_store %q: this build has no %s:// driver (it links file:// and mem://; build with gocloud.dev/blob/s3blob or gcsblob imported for S3 or GCS)", f.SnapshotStore, u.Scheme)
		}
	}
	return nil
}

// options are the processor options for the settings that differ from
// processor's defaults.
func (f haConfig) options() []processor.Option {
	var opts []processor.Option
	if f.StandbyReplicas > 0 {
		opts = append(opts, processor.WithStandbyReplicas(f.StandbyReplicas))
	}
	if f.AcceptableRecoveryLag > 0 {
		opts = append(opts, processor.WithAcceptableRecoveryLag(f.AcceptableRecoveryLag))
	}
	if f.SnapshotStore != "" {
		opts = append(opts, processor.WithSnapshotStore(f.SnapshotStore))
	}
	if f.MaxWarmupReplicas > 0 {
		opts = append(opts, processor.WithMaxWarmupReplicas(f.MaxWarmupReplicas))
	}
	if d, _ := f.probingRebalanceInterval(); d > 0 {
		opts = append(opts, processor.WithProbingRebalanceInterval(d))
	}
	if f.Threads > 0 {
		opts = append(opts, processor.WithThreads(f.Threads))
	}
	if f.MaxRecordsPerTaskPass != 0 {
		opts = append(opts, processor.WithMaxRecordsPerTaskPass(f.MaxRecordsPerTaskPass))
	}
	if f.RestoreShare > 0 {
		opts = append(opts, processor.WithRestoreShare(f.RestoreShare))
	}
	if d, _ := f.peerDeadAfter(); d != 0 {
		opts = append(opts, processor.WithPeerDeadAfter(d))
	}
	if d, _ := f.livenessTimeout(); d != 0 {
		opts = append(opts, processor.WithLivenessTimeout(d))
	}
	return opts
}

// peerDeadAfter parses PeerDeadAfter: "off" is -1, empty 0 (the default).
func (f haConfig) peerDeadAfter() (time.Duration, error) {
	return durationOrOff("peer_dead_after", f.PeerDeadAfter, "500ms", processor.MinPeerDeadAfter)
}

// livenessTimeout parses LivenessTimeout: "off" is -1, empty 0 (the
// default).
func (f haConfig) livenessTimeout() (time.Duration, error) {
	return durationOrOff("liveness_timeout", f.LivenessTimeout, "5m", processor.MinLivenessTimeout)
}

// durationOrOff parses setting name's value v: a Go duration of at least
// least, "off" (-1) or empty (0, the default); example is one in the error.
func durationOrOff(name, v, example string, least time.Duration) (time.Duration, error) {
	switch v {
	case "":
		return 0, nil
	case "off":
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: %s %q: want a positive duration such as %s, or off", name, v, example)
	}
	if d < least {
		return 0, fmt.Errorf("config: %s %s: want at least %s, or off", name, d, least)
	}
	return d, nil
}

// probingRebalanceInterval parses probing_rebalance_interval; 0 when unset.
func (f haConfig) probingRebalanceInterval() (time.Duration, error) {
	if f.ProbingRebalanceInterval == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(f.ProbingRebalanceInterval)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: probing_rebalance_interval %q: want a positive duration such as 5m", f.ProbingRebalanceInterval)
	}
	return d, nil
}
