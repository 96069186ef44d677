package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The failover measurement (issue #13, "Measure"): two instances of a
// system share one consumer group and a table of Keys keys × ~100 B, input
// keeps arriving at a fixed rate, and the instance that owns input
// partition 0 is SIGKILLed. The survivor must take over the victim's
// partitions: its group first has to notice that the victim is gone (the
// broker expires the victim's session, the same timeout for every system),
// then rebalance, then the new owner has to make the victim's state
// current (nothing to do with a caught-up standby; load a snapshot and
// replay the changelog tail; or replay the whole changelog) before it can
// commit the first output of the moved partitions. The harness times each
// step from outside the systems:
//
//   - kill → reassigned: the group coordinator, polled with DescribeGroup,
//     shows a Stable generation without the victim in which the survivor
//     holds every moved partition (detection and rebalance);
//   - reassigned → first output: an external read_committed consumer sees
//     the first output record of a moved partition whose input was sent
//     after the kill (restore, processing and the commit of a
//     transaction);
//   - p99 staleness of the other partitions' outputs (those the survivor
//     owned all along; staleness = the external consumer's receive time −
//     the input's send time, which the output carries as its timestamp),
//     in two windows of input send time: steady state, the
//     FailoverOptions.Steady before the kill, and the restore window, from
//     reassignment (the survivor starts to make the moved state current)
//     until FailoverOptions.After past the first new output. Their ratio is
//     the issue's "other tasks' p99 staleness during the restore within 20%
//     of steady state". The kill waits until the system has settled after
//     the table's load (see settled): a steady window that still holds the
//     load's after-effects is not steady state.

// MemberConfig is what a worker needs beyond Job to run as one of several
// members of a group. Zero values keep each system's defaults.
type MemberConfig struct {
	// Instance names the member: tidemark's instance id, Kafka Streams'
	// group.instance.id (KIP-345; Streams appends "-<thread>"). The harness
	// finds the owner of a partition by this name in DescribeGroups.
	Instance string `json:"instance,omitempty"`
	// StandbyReplicas: tidemark's WithStandbyReplicas, Streams'
	// num.standby.replicas.
	StandbyReplicas int `json:"standby_replicas,omitempty"`
	// SnapshotURL is tidemark's snapshot store (WithSnapshotStore).
	SnapshotURL string `json:"snapshot_url,omitempty"`
	// CheckpointMaxInterval caps tidemark's checkpoint interval
	// (Config.Checkpoint.MaxInterval); snapshots are taken at checkpoints.
	CheckpointMaxInterval time.Duration `json:"checkpoint_max_interval,omitempty"`
	// SessionTimeout and HeartbeatInterval of the group member.
	SessionTimeout    time.Duration `json:"session_timeout,omitempty"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval,omitempty"`
	// HTTP, for tidemark, serves the worker's HTTP endpoints on a free
	// loopback port, as a deployed instance serves its metrics, which
	// turns on its peer failure detector (processor/app_peers.go).
	HTTP bool `json:"http,omitempty"`
	// RestoreShare, for tidemark, is processor.WithRestoreShare (0: the
	// default pacing).
	RestoreShare float64 `json:"restore_share,omitempty"`
}

// streamsArgs are the Kafka Streams peer's flags for m.
func (m MemberConfig) streamsArgs() []string {
	var args []string
	if m.Instance != "" {
		args = append(args, "--instance-id", m.Instance)
	}
	if m.StandbyReplicas > 0 {
		args = append(args, "--standby-replicas", strconv.Itoa(m.StandbyReplicas))
	}
	if m.SessionTimeout > 0 {
		args = append(args, "--session-timeout-ms", strconv.FormatInt(m.SessionTimeout.Milliseconds(), 10))
	}
	if m.HeartbeatInterval > 0 {
		args = append(args, "--heartbeat-interval-ms", strconv.FormatInt(m.HeartbeatInterval.Milliseconds(), 10))
	}
	return args
}

// FailoverCase is one contender of the failover measurement.
type FailoverCase struct {
	Name string `json:"name"`
	// Kind is "tidemark" or "kstreams".
	Kind     string `json:"kind"`
	Standby  int    `json:"standby_replicas"`
	Snapshot bool   `json:"snapshot_store"`
	// Keys overrides FailoverOptions.Keys for this case: the snapshot and
	// full-restore cases run at two table sizes to show where loading a
	// snapshot starts to beat replaying the changelog.
	Keys int `json:"keys,omitempty"`
	// NoPeerDetector, for tidemark, runs the members without HTTP, so
	// without the peer failure detector: the takeover then waits for the
	// session timeout, as Kafka Streams' does.
	NoPeerDetector bool `json:"no_peer_detector,omitempty"`
	// RestoreShare, for tidemark, replaces the default restore pacing
	// (processor.DefaultRestoreShare); 1 restores unpaced.
	RestoreShare float64 `json:"restore_share,omitempty"`
	// CommitInterval, for tidemark, replaces the adaptive commit policy
	// with a fixed interval (a diagnostic: see the README's failover
	// notes on the adaptive controller after the load).
	CommitInterval time.Duration `json:"commit_interval,omitempty"`
}

// DefaultFailoverCases are the five cases: (a) tidemark with a
// standby, (b) tidemark with a snapshot store and no local state on the
// survivor, (c) tidemark restoring the whole changelog, (d) Kafka Streams
// with num.standby.replicas=1, (e) Kafka Streams restoring the whole
// changelog; and, for comparison, tidemark with a standby and without its
// peer failure detector (it waits for the session timeout, as Kafka
// Streams does) and tidemark's snapshot and full restore unpaced
// (processor.WithRestoreShare(1)).
// tidemark's cases are included only when a "tidemark" worker is
// registered.
func DefaultFailoverCases() []FailoverCase {
	var out []FailoverCase
	if _, ok := worker("tidemark"); ok {
		out = append(out,
			FailoverCase{Name: "tidemark-standby", Kind: "tidemark", Standby: 1},
			FailoverCase{Name: "tidemark-standby-nodetect", Kind: "tidemark", Standby: 1, NoPeerDetector: true},
			FailoverCase{Name: "tidemark-snapshot", Kind: "tidemark", Snapshot: true},
			FailoverCase{Name: "tidemark-restore", Kind: "tidemark"},
			FailoverCase{Name: "tidemark-restore-unpaced", Kind: "tidemark", RestoreShare: 1},
			FailoverCase{Name: "tidemark-snapshot-unpaced", Kind: "tidemark", Snapshot: true, RestoreShare: 1},
			// Snapshot vs full replay at a tenth of the size.
			FailoverCase{Name: "tidemark-snapshot-100k", Kind: "tidemark", Snapshot: true, Keys: 100_000},
			FailoverCase{Name: "tidemark-restore-100k", Kind: "tidemark", Keys: 100_000},
		)
	}
	return append(out,
		FailoverCase{Name: "kstreams-standby", Kind: "kstreams", Standby: 1},
		FailoverCase{Name: "kstreams-restore", Kind: "kstreams"},
	)
}

// ExtraFailoverCases run only when named in FailoverOptions.Cases (bench
// --failover-cases): tidemark's full restore at restore shares of 0.3 and
// 0.4, to measure what pacing trades (the moved partitions' restore time
// against the other partitions' staleness meanwhile).
func ExtraFailoverCases() []FailoverCase {
	if _, ok := worker("tidemark"); !ok {
		return nil
	}
	return []FailoverCase{{Name: "tidemark-restore-share30", Kind: "tidemark", RestoreShare: 0.3},
		{Name: "tidemark-restore-share40", Kind: "tidemark", RestoreShare: 0.4}}
}

// FailoverOptions configure RunFailover. Zero fields take defaults.
type FailoverOptions struct {
	Brokers []string
	Cases   []FailoverCase
	// Keys in the table, each written once before the measurement (~100 B
	// values). Default 1M (quick 100k).
	Keys       int
	Partitions int32 // default 4
	// Rate of the input that keeps arriving, records/s. Default 2000.
	Rate float64
	// SessionTimeout of every member of every system. Default: the
	// broker's group.min.session.timeout.ms, so detection is as fast as the
	// broker allows.
	SessionTimeout time.Duration
	// HeartbeatInterval of every member. Default min(1s, SessionTimeout/3).
	HeartbeatInterval time.Duration
	// Steady is the steady-state window: inputs sent in the Steady before
	// the kill. Default 10s (quick 5s). The input runs at least Settle +
	// Steady (Settle default 5s, quick 3s) before the kill, and longer
	// until the system has settled after the load (settled), at most
	// SettleMax (default 60s, quick 30s) past Settle + Steady; a case that
	// never settles is killed then and reported as not settled.
	Steady, Settle, SettleMax time.Duration
	// Repeats runs the whole list of cases this many times, one round
	// after the other (interleaved, so the machine's background load
	// spreads over all cases). Default 1.
	Repeats int
	// After is how long past the first new output of the moved partitions
	// the takeover window lasts. Default 3s.
	After time.Duration
	// SnapshotInterval caps the checkpoint interval of the snapshot case,
	// so that snapshots are taken at least that often and the changelog
	// tail a new owner replays past the newest snapshot is at most that
	// much input. The default cadence (Young's rule from a 24 h failure
	// prior, capped by a 30 s restore-time target) would otherwise leave
	// the table unsnapshotted for minutes after the load. Default 10s.
	SnapshotInterval time.Duration
	// Timeout bounds the wait for the first new output. Default 3 min.
	Timeout time.Duration
	Quick   bool
	Env     Env
	WorkDir string
}

func (o *FailoverOptions) ensureDefaults(ctx context.Context, adm *kadm.Client) error {
	if len(o.Cases) == 0 {
		o.Cases = DefaultFailoverCases()
	}
	for _, c := range o.Cases {
		if err := checkWorker(c.Name, c.Kind); err != nil {
			return err
		}
	}
	if o.Keys == 0 {
		o.Keys = 1_000_000
		if o.Quick {
			o.Keys = 100_000
		}
	}
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.Partitions < 2 {
		return fmt.Errorf("bench: failover needs at least 2 partitions, not %d", o.Partitions)
	}
	if o.Rate == 0 {
		o.Rate = 2000
	}
	if o.SessionTimeout == 0 {
		d, err := minSessionTimeout(ctx, adm)
		if err != nil {
			return err
		}
		o.SessionTimeout = d
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = min(time.Second, o.SessionTimeout/3)
	}
	if o.Steady == 0 {
		o.Steady = 10 * time.Second
		if o.Quick {
			o.Steady = 5 * time.Second
		}
	}
	if o.Settle == 0 {
		o.Settle = min(5*time.Second, o.Steady/2)
		if o.Quick {
			o.Settle = 3 * time.Second
		}
	}
	if o.SettleMax == 0 {
		o.SettleMax = 60 * time.Second
		if o.Quick {
			o.SettleMax = 30 * time.Second
		}
	}
	if o.Repeats <= 0 {
		o.Repeats = 1
	}
	if o.After == 0 {
		o.After = 3 * time.Second
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	base := Options{Brokers: o.Brokers, Env: o.Env, WorkDir: o.WorkDir, Records: 10_000, Workloads: []string{"count"}, Systems: []System{{Name: "-"}}}
	if err := base.EnsureDefaults(); err != nil {
		return err
	}
	o.Env, o.WorkDir = base.Env, base.WorkDir
	return nil
}

// minSessionTimeout reads group.min.session.timeout.ms of a broker of the
// cluster (classic group protocol, which both tidemark and Kafka Streams
// use).
func minSessionTimeout(ctx context.Context, adm *kadm.Client) (time.Duration, error) {
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return 0, fmt.Errorf("bench: broker metadata: %w", err)
	}
	if len(meta.Brokers) == 0 {
		return 0, errors.New("bench: broker metadata lists no brokers")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, meta.Brokers[0].NodeID)
	if err != nil {
		return 0, fmt.Errorf("bench: broker configs: %w", err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "group.min.session.timeout.ms" && c.Value != nil {
				ms, err := strconv.Atoi(*c.Value)
				if err != nil {
					return 0, fmt.Errorf("bench: group.min.session.timeout.ms %q: %w", *c.Value, err)
				}
				return time.Duration(ms) * time.Millisecond, nil
			}
		}
	}
	return 0, errors.New("bench: broker does not report group.min.session.timeout.ms")
}

// FailoverResult is one case's measurement. Times are seconds.
type FailoverResult struct {
	Case     string `json:"case"`
	Kind     string `json:"kind"`
	Standby  int    `json:"standby_replicas"`
	Snapshot bool   `json:"snapshot_store"`
	Keys     int    `json:"keys"`
	Repeat   int    `json:"repeat"`
	// Victim is the killed instance; Moved the input partitions it owned.
	Victim string  `json:"victim,omitempty"`
	Moved  []int32 `json:"moved_partitions,omitempty"`
	// LoadSec is how long both instances took to process the table's
	// records (the group's committed offsets reaching the input's end).
	LoadSec float64 `json:"load_seconds,omitempty"`
	// ExpiredSec: kill → the victim no longer a member (its session
	// expired, or tidemark's peer detector removed it).
	ExpiredSec float64 `json:"expired_seconds,omitempty"`
	// ReassignedSec: kill → a Stable generation in which the survivor owns
	// every moved partition.
	ReassignedSec float64 `json:"reassigned_seconds,omitempty"`
	// TakeoverSec: reassigned → the first committed output of a moved
	// partition for an input sent after the kill.
	TakeoverSec float64 `json:"takeover_seconds,omitempty"`
	// TotalSec: kill → that first output.
	TotalSec float64 `json:"total_seconds,omitempty"`
	// RestoredRecords are the changelog records the survivor reported
	// restored after the kill (its RESTORED lines: tidemark's
	// RestoreListener, Streams' global StateRestoreListener), by the end
	// of the takeover window; Snapshots and SnapshotBytes the snapshots it
	// loaded. They show how the moved state was made current.
	RestoredRecords int64 `json:"restored_records"`
	Snapshots       int   `json:"snapshots_loaded,omitempty"`
	SnapshotBytes   int64 `json:"snapshot_bytes,omitempty"`
	// SettledSec is how long the input ran before the kill; Settled is
	// false when the system had not settled by then (see settled).
	SettledSec float64 `json:"settled_seconds,omitempty"`
	Settled    bool    `json:"settled"`
	// Staleness (ms) of the outputs of the partitions that did not move,
	// for inputs sent in steady state (the Steady before the kill) and
	// during the restore (from reassignment until After past the first new
	// output); the Takeover fields are the restore window's.
	SteadyP50     float64 `json:"steady_p50_ms,omitempty"`
	SteadyP99     float64 `json:"steady_p99_ms,omitempty"`
	SteadyCount   int64   `json:"steady_outputs,omitempty"`
	TakeoverP50   float64 `json:"takeover_p50_ms,omitempty"`
	TakeoverP99   float64 `json:"takeover_p99_ms,omitempty"`
	TakeoverCount int64   `json:"takeover_outputs,omitempty"`
	// SteadyMs and TakeoverMs are the same outputs' staleness in 1 ms
	// buckets, for the p99 pooled over a case's runs (failover_pooled.go).
	SteadyMs   msCounts `json:"steady_ms_counts,omitempty"`
	TakeoverMs msCounts `json:"takeover_ms_counts,omitempty"`
	// Series is the unmoved partitions' staleness per second of input
	// send time, from the start of the input to the end of the takeover
	// window (see SeriesPoint).
	Series []SeriesPoint `json:"series,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// P99Ratio is takeover over steady-state p99 of the unmoved partitions.
func (r FailoverResult) P99Ratio() float64 {
	if r.SteadyP99 <= 0 {
		return 0
	}
	return r.TakeoverP99 / r.SteadyP99
}

// FailoverReport is a whole failover run.
type FailoverReport struct {
	Started             time.Time        `json:"started"`
	Machine             string           `json:"machine"`
	Keys                int              `json:"keys"`
	ValueBytes          int              `json:"value_bytes"`
	Partitions          int32            `json:"partitions"`
	Rate                float64          `json:"rate"`
	SessionTimeoutMs    int64            `json:"session_timeout_ms"`
	HeartbeatIntervalMs int64            `json:"heartbeat_interval_ms"`
	AfterMs             int64            `json:"takeover_window_after_first_output_ms"`
	SnapshotIntervalMs  int64            `json:"snapshot_checkpoint_max_interval_ms"`
	SteadyWindowMs      int64            `json:"steady_window_ms"`
	Repeats             int              `json:"repeats"`
	Results             []FailoverResult `json:"results"`
	Duration            string           `json:"duration"`
}

// RunFailover measures every case in turn. A case that fails records its
// error and the run goes on.
func RunFailover(ctx context.Context, o FailoverOptions, progress func(string)) (*FailoverReport, error) {
	if len(o.Brokers) == 0 {
		return nil, errors.New("bench: Brokers is required (start one with `make kafka-up`)")
	}
	cl, err := driverClient(ctx, o.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := o.ensureDefaults(ctx, adm); err != nil {
		return nil, err
	}
	f := &failover{o: o, cl: cl, adm: adm, progress: progress,
		h: &harness{o: Options{Brokers: o.Brokers, Partitions: o.Partitions, WorkDir: o.WorkDir}, cl: cl, adm: adm, progress: progress}}
	rep := &FailoverReport{Started: time.Now(), Machine: machine(), Keys: o.Keys, ValueBytes: len(inputRecord(Job{}, nil, o.Keys, time.Now()).Value),
		Partitions: o.Partitions, Rate: o.Rate, SessionTimeoutMs: o.SessionTimeout.Milliseconds(), HeartbeatIntervalMs: o.HeartbeatInterval.Milliseconds(), AfterMs: o.After.Milliseconds(),
		SnapshotIntervalMs: o.SnapshotInterval.Milliseconds(), SteadyWindowMs: o.Steady.Milliseconds(), Repeats: o.Repeats}
rounds:
	for r := range o.Repeats {
		for _, c := range o.Cases {
			res := f.run(ctx, c)
			res.Repeat = r + 1
			rep.Results = append(rep.Results, res)
			if ctx.Err() != nil {
				break rounds
			}
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, ctx.Err()
}

type failover struct {
	o        FailoverOptions
	cl       *kgo.Client
	adm      *kadm.Client
	h        *harness
	progress func(string)
}

func (f *failover) run(ctx context.Context, c FailoverCase) (res FailoverResult) {
	keys := f.o.Keys
	if c.Keys > 0 {
		keys = c.Keys
	}
	res = FailoverResult{Case: c.Name, Kind: c.Kind, Standby: c.Standby, Snapshot: c.Snapshot, Keys: keys}
	f.progress(fmt.Sprintf("failover: %s (%d keys, %.0f records/s, session timeout %s)", c.Name, keys, f.o.Rate, f.o.SessionTimeout))
	defer func() {
		if res.Error != "" {
			f.progress("  error: " + firstLine(res.Error))
		}
	}()
	sys := System{Name: c.Name, Kind: c.Kind, Policy: "adaptive"}
	if c.CommitInterval > 0 {
		sys.Policy, sys.CommitInterval = "fixed", c.CommitInterval
	}
	job, err := f.h.job(ctx, "latest", sys)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.h.cleanup(job)
	member := MemberConfig{StandbyReplicas: c.Standby, SessionTimeout: f.o.SessionTimeout, HeartbeatInterval: f.o.HeartbeatInterval,
		HTTP: c.Kind == "tidemark" && !c.NoPeerDetector, RestoreShare: c.RestoreShare}
	if c.Snapshot {
		// One store both instances reach, as a bucket would be.
		member.SnapshotURL = "file://" + filepath.Join(job.StateDir, "snapshots")
		member.CheckpointMaxInterval = f.o.SnapshotInterval
	}
	names := []string{"a", "b"}
	procs := make([]*process, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		j := job
		j.MemberConfig = member
		j.Instance = name
		j.StateDir = filepath.Join(job.StateDir, name)
		wg.Go(func() { procs[i], errs[i] = sys.start(ctx, f.o.Env, j) })
	}
	wg.Wait()
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stop()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
		return res
	}
	// Both members own partitions before the table is written, so neither
	// holds state of the other's partitions (no warm-up moves later, no
	// local state of the moved partitions on the survivor).
	if _, err := f.awaitGroup(ctx, job, 90*time.Second, func(g kadm.DescribedGroup) bool {
		owned := assignments(g, job.Input)
		return g.State == "Stable" && len(owned) == len(names) && !slices.ContainsFunc(names, func(n string) bool { return len(owned[memberOf(owned, n)]) == 0 })
	}); err != nil {
		res.Error = fmt.Sprintf("both instances never owned partitions: %v", err)
		return res
	}
	f.progress(fmt.Sprintf("  loading %d keys", keys))
	loadStart := time.Now()
	if err := preProduce(ctx, f.cl, job, keys, keys, true); err != nil {
		res.Error = err.Error()
		return res
	}
	if _, err := throughput(ctx, f.adm, job.AppID, job.Input, loadStart, 10*time.Minute); err != nil {
		res.Error = err.Error()
		return res
	}
	loaded := time.Now()
	res.LoadSec = loaded.Sub(loadStart).Seconds()
	f.progress(fmt.Sprintf("  loaded in %.1f s; input at %.0f records/s until settled (≥ %s)", res.LoadSec, f.o.Rate, f.o.Settle+f.o.Steady))

	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	obs := &outputs{}
	obsErr := make(chan error, 1)
	go func() { obsErr <- obs.consume(octx, f.o.Brokers, job.Output) }()
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	driveStart := time.Now()
	go func() { _, _ = drive(dctx, f.cl, job, f.o.Rate, keys) }()
	if c.Snapshot {
		// Case (b) is about loading a snapshot: wait until every task has
		// one that reflects the table, rather than time a replay of the
		// whole changelog when the checkpoint cadence has not taken one
		// yet. The input keeps arriving meanwhile.
		n, err := awaitSnapshots(ctx, strings.TrimPrefix(member.SnapshotURL, "file://"), loaded, int(f.o.Partitions), 3*time.Minute)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		f.progress(fmt.Sprintf("  %d tasks snapshotted after the load (%.1f s)", n, time.Since(loaded).Seconds()))
	}
	settled, ok := f.settle(ctx, obs, driveStart)
	if !ok {
		return res
	}
	res.Settled = settled
	res.SettledSec = time.Since(driveStart).Seconds()
	f.progress(fmt.Sprintf("  input ran %.1f s, settled: %v", res.SettledSec, settled))
	for i, p := range procs {
		if err := p.exitedEarly(); err != nil {
			res.Error = fmt.Sprintf("instance %s: %v", names[i], err)
			return res
		}
	}

	// The victim: the owner of input partition 0.
	g, err := f.awaitGroup(ctx, job, 10*time.Second, func(g kadm.DescribedGroup) bool { return g.State == "Stable" })
	if err != nil {
		res.Error = err.Error()
		return res
	}
	owned := assignments(g, job.Input)
	var victim int
	found := false
	for i, n := range names {
		if slices.Contains(owned[memberOf(owned, n)], 0) {
			victim, found = i, true
		}
	}
	if !found {
		res.Error = fmt.Sprintf("no instance owns partition 0: %v", owned)
		return res
	}
	res.Victim = names[victim]
	res.Moved = owned[memberOf(owned, names[victim])]
	survivor := names[1-victim]
	kill := time.Now()
	_ = procs[victim].cmd.Process.Signal(syscall.SIGKILL)
	<-procs[victim].exited
	procs[victim] = nil
	f.progress(fmt.Sprintf("  killed %s (partitions %v)", res.Victim, res.Moved))

	type stamp struct {
		expired, reassigned time.Time
		err                 error
	}
	watched := make(chan stamp, 1)
	go func() {
		var s stamp
		_, s.err = f.awaitGroup(ctx, job, f.o.Timeout, func(g kadm.DescribedGroup) bool {
			owned := assignments(g, job.Input)
			if _, ok := owned[memberOf(owned, res.Victim)]; ok {
				return false
			}
			if s.expired.IsZero() {
				s.expired = time.Now()
			}
			mine := owned[memberOf(owned, survivor)]
			return g.State == "Stable" && !slices.ContainsFunc(res.Moved, func(p int32) bool { return !slices.Contains(mine, p) })
		})
		s.reassigned = time.Now()
		watched <- s
	}()
	first, ferr := obs.firstAfter(ctx, res.Moved, kill, f.o.Timeout)
	st := <-watched
	if st.err != nil {
		res.Error = fmt.Sprintf("reassignment: %v", st.err)
		return res
	}
	res.ExpiredSec = st.expired.Sub(kill).Seconds()
	res.ReassignedSec = st.reassigned.Sub(kill).Seconds()
	if ferr != nil {
		res.Error = ferr.Error()
		return res
	}
	res.TotalSec = first.Sub(kill).Seconds()
	res.TakeoverSec = first.Sub(st.reassigned).Seconds()
	f.progress(fmt.Sprintf("  reassigned after %.2f s (victim out of the group after %.2f s), first new output %.2f s later",
		res.ReassignedSec, res.ExpiredSec, res.TakeoverSec))
	if !sleepCtx(ctx, f.o.After) {
		return res
	}
	dcancel()
	// Outputs of inputs sent at the end of the window may still be on
	// their way.
	if !sleepCtx(ctx, 2*time.Second) {
		return res
	}
	ocancel()
	res.RestoredRecords, res.Snapshots, res.SnapshotBytes = procs[1-victim].events.restoresSince(kill)
	f.progress(fmt.Sprintf("  survivor restored %d changelog records, loaded %d snapshots (%d bytes)", res.RestoredRecords, res.Snapshots, res.SnapshotBytes))
	if err := <-obsErr; err != nil {
		res.Error = err.Error()
		return res
	}
	steady, takeover := newStaleness(), newStaleness()
	steadyMs, takeoverMs := map[int64]int64{}, map[int64]int64{}
	obs.each(func(o observed) {
		if slices.Contains(res.Moved, o.partition) {
			return
		}
		switch {
		case o.ts.Before(kill.Add(-f.o.Steady)):
		case o.ts.Before(kill):
			steady.record(o.recv.Sub(o.ts))
			countMs(steadyMs, o.recv.Sub(o.ts))
		case o.ts.Before(st.reassigned):
		case o.ts.Before(first.Add(f.o.After)):
			takeover.record(o.recv.Sub(o.ts))
			countMs(takeoverMs, o.recv.Sub(o.ts))
		}
	})
	res.SteadyP50, res.SteadyP99, res.SteadyCount = steady.Quantile(50), steady.Quantile(99), steady.Count
	res.TakeoverP50, res.TakeoverP99, res.TakeoverCount = takeover.Quantile(50), takeover.Quantile(99), takeover.Count
	res.SteadyMs, res.TakeoverMs = newMsCounts(steadyMs), newMsCounts(takeoverMs)
	if err := dumpOutputs(obs, c.Name, kill, first.Add(f.o.After)); err != nil {
		f.progress("  " + err.Error())
	}
	res.Series = stalenessSeries(obs, res.Moved, kill, driveStart, first.Add(f.o.After), time.Second)
	f.progress(fmt.Sprintf("  unmoved partitions' p99: steady %.1f ms (%d outputs), restore window %.1f ms (%d outputs)",
		res.SteadyP99, res.SteadyCount, res.TakeoverP99, res.TakeoverCount))
	return res
}

// awaitSnapshots waits until the snapshot store directory dir holds a
// complete snapshot (its manifest: changelog/snapshot.go lays objects out
// as <application>/<task>/<chain>/<seq>.manifest.json) written after since
// for at least tasks tasks, and returns how many tasks have one.
func awaitSnapshots(ctx context.Context, dir string, since time.Time, tasks int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		fresh := map[string]bool{}
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".manifest.json") {
				return nil
			}
			if info, err := d.Info(); err == nil && !info.ModTime().Before(since) {
				fresh[filepath.Dir(filepath.Dir(path))] = true // the task's directory
			}
			return nil
		})
		if len(fresh) >= tasks {
			return len(fresh), nil
		}
		if time.Now().After(deadline) {
			return len(fresh), fmt.Errorf("snapshots of %d of %d tasks in %s within %s of the load", len(fresh), tasks, dir, timeout)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return len(fresh), ctx.Err()
		}
	}
}

// awaitGroup polls the group's description every 20 ms until done accepts
// it, and returns that description.
func (f *failover) awaitGroup(ctx context.Context, job Job, timeout time.Duration, done func(kadm.DescribedGroup) bool) (kadm.DescribedGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last kadm.DescribedGroup
	for {
		gs, err := f.adm.DescribeGroups(ctx, job.AppID)
		if err == nil {
			if g, ok := gs[job.AppID]; ok && g.Err == nil {
				last = g
				if done(g) {
					return g, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("group %s: not there after %s (last state %q, owners %v)", job.AppID, timeout, last.State, assignments(last, job.Input))
		case <-tick.C:
		}
	}
}

// assignments maps each member's instance id to its partitions of topic.
func assignments(g kadm.DescribedGroup, topic string) map[string][]int32 {
	out := map[string][]int32{}
	for _, m := range g.Members {
		id := m.MemberID
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		out[id] = nil
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				if t.Topic == topic {
					out[id] = append(out[id], t.Partitions...)
				}
			}
		}
		slices.Sort(out[id])
	}
	return out
}

// memberOf finds the member id of instance name: tidemark's instance id is
// the name, Kafka Streams' is name-<thread>.
func memberOf(owned map[string][]int32, name string) string {
	for id := range owned {
		if id == name || strings.HasPrefix(id, name+"-") {
			return id
		}
	}
	return "\x00" + name // not a member
}

// observed is one output record seen by the external consumer.
type observed struct {
	partition int32
	offset    int64
	ts, recv  time.Time
}

// outputs collects every output record with its receive time.
type outputs struct {
	mu   sync.Mutex
	recs []observed
}

func (o *outputs) consume(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		if err := fetchErr(fs); err != nil {
			return err
		}
		o.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { o.recs = append(o.recs, observed{r.Partition, r.Offset, r.Timestamp, now}) })
		o.mu.Unlock()
	}
}

// firstAfter waits for the first record of one of partitions stamped at or
// after t (its input was sent then) and returns its receive time.
func (o *outputs) firstAfter(ctx context.Context, partitions []int32, t time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	t = t.Truncate(time.Millisecond) // record timestamps are milliseconds
	seen := 0
	for time.Now().Before(deadline) {
		o.mu.Lock()
		recs := o.recs[seen:]
		seen = len(o.recs)
		o.mu.Unlock()
		for _, r := range recs {
			if !r.ts.Before(t) && slices.Contains(partitions, r.partition) {
				return r.recv, nil
			}
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return time.Time{}, ctx.Err()
		}
	}
	return time.Time{}, fmt.Errorf("no output of partitions %v within %s of the kill", partitions, timeout)
}

func (o *outputs) each(fn func(observed)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.recs {
		fn(r)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
