package processor

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// Snapshots are the recovery point of a task that moves to an instance
// without local state for it (node loss, scale-out, a rolling deploy onto
// fresh disks, local state quarantined as corrupt): with a snapshot
// store, the new owner loads the task's newest snapshot chain and replays
// only the changelog tail since, instead of the whole changelog.
//
// At each checkpoint (the checkpoint scheduler's cadence; Checkpoint
// options), after the Badger sync, the session starts one round of
// snapshots on a goroutine of its own, unless the previous round is still
// running: each open task DB with state applied since its last snapshot
// is backed up (a Badger incremental backup since the previous snapshot
// of its chain, or a full backup every ChainLength snapshots), at most
// two tasks at a time. The record loop never waits for a snapshot; the
// session's close cancels the round and waits for it. A task DB holds
// only committed state (Apply runs after the transaction commits), and a
// backup reads one consistent Badger state with the changelog offsets it
// reflects, so a snapshot holds nothing a transaction did not commit;
// see changelog/snapshot.go.
//
// On the restoring task's goroutine, before its stores open: when the
// state directory has no DB for the task, the newest usable chain is
// loaded (a damaged or partial one is logged and the previous chain
// tried; with none, the changelog restore starts from the beginning, as
// without snapshots). The restore then replays the changelogs from the
// offsets the snapshot reflects. The task logs "task state" with
// state=restoring and phase=snapshot before, and the snapshot it loaded
// after; a RestoreListener that also implements SnapshotRestoreListener
// hears of it.

// SnapshotConfig configures snapshots; see WithSnapshotStore.
type SnapshotConfig struct {
	// URL of the snapshot store, opened with gocloud.dev's
	// blob.OpenBucket: file:///var/lib/tidemark-snapshots (created if
	// missing), or s3://bucket?region=..., gs://bucket with the driver
	// linked in by a blank import (gocloud.dev/blob/s3blob,
	// gocloud.dev/blob/gcsblob). Empty: no snapshots.
	URL string
	// ChainLength is how many snapshots a chain holds, its full backup
	// included. Default changelog.DefaultSnapshotChainLength (10).
	ChainLength int
	// Retention is how many complete chains per task are kept. Default
	// changelog.DefaultSnapshotRetention (2).
	Retention int
}

// WithSnapshotStore writes task snapshots to the blob store at url at
// each checkpoint, and loads them into tasks assigned without local
// state. Every instance of the application must use the same store.
func WithSnapshotStore(url string) Option {
	return func(c *Config) { c.Snapshots.URL = url }
}

// WithSnapshotChainLength starts a new snapshot chain (a full backup)
// every n snapshots of a task; the others are incremental.
func WithSnapshotChainLength(n int) Option {
	return func(c *Config) { c.Snapshots.ChainLength = n }
}

// WithSnapshotRetention keeps the newest chains complete chains of each
// task; older ones are deleted once a new chain's full backup is written.
func WithSnapshotRetention(chains int) Option {
	return func(c *Config) { c.Snapshots.Retention = chains }
}

// SnapshotRestoreListener is implemented by a RestoreListener that also
// wants to hear of snapshot loads: OnSnapshotLoaded is called on the
// restoring task's goroutine after a snapshot chain was loaded into the
// task's empty local state, before its changelog restore (which then
// starts at offsets, the changelog offsets the snapshot reflects).
type SnapshotRestoreListener interface {
	OnSnapshotLoaded(task topology.TaskID, chain string, seq int, bytes int64, offsets changelog.ChangelogOffsets)
}

// openSnapshots opens the snapshot store when one is configured.
func (a *App) openSnapshots(ctx context.Context) error {
	c := a.cfg.Snapshots
	if c.URL == "" {
		return nil
	}
	s, err := changelog.OpenSnapshotStore(ctx, c.URL, a.topo.Application(), changelog.SnapshotOptions{
		ChainLength: c.ChainLength, Retention: c.Retention, Logger: a.log, Pace: a.pace})
	if err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	a.snapStore = s
	return nil
}

func (a *App) closeSnapshots() {
	if a.snapStore == nil {
		return
	}
	if err := a.snapStore.Close(); err != nil {
		a.log.Warn("close snapshot store", "err", err)
	}
}

// snapRunner is a session's snapshot goroutine: at most one round at a
// time. A checkpoint during a round asks for one more round after it
// (again), so the state of the last checkpoint is always snapshotted,
// even when no further checkpoint follows (the input went quiet).
type snapRunner struct {
	mu      sync.Mutex
	running bool
	again   bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// snapshot starts a round of snapshots, or asks the running one for
// another round. The loop calls it after a checkpoint. With stream threads
// only thread 0's session writes snapshots: a round covers every task DB
// of the process, whichever thread runs the task (app_threads.go).
func (s *session) snapshot() {
	a := s.app
	if a.snapStore == nil || s.th.index != 0 {
		return
	}
	r := &s.snap
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		r.again = true
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	r.running, r.cancel, r.done = true, cancel, done
	db := a.db
	go func() {
		defer close(done)
		defer cancel()
		for {
			s.snapshotRound(ctx, db)
			r.mu.Lock()
			if !r.again || ctx.Err() != nil {
				r.running, r.again = false, false
				r.mu.Unlock()
				return
			}
			r.again = false
			r.mu.Unlock()
		}
	}()
}

// snapshotRound snapshots every running active task's DB with new state.
// Standbys' DBs are left out: the active's chain is the task's recovery
// point, and a standby writing one of its own doubled the snapshot I/O,
// while each writer's retention pruned the chain the other was extending.
func (s *session) snapshotRound(ctx context.Context, db *changelog.DB) {
	a := s.app
	results, err := db.WriteSnapshotsOf(ctx, a.snapStore, a.ha.isActive)
	for _, res := range results {
		if res.Skipped {
			continue
		}
		a.metrics.snap.seconds.Observe(res.Duration.Seconds())
		a.metrics.snap.bytes.Add(float64(res.Manifest.Bytes))
		a.log.Debug("snapshot written", "task", res.Task, "chain", res.Manifest.Chain, "seq", res.Manifest.Seq,
			"bytes", res.Manifest.Bytes, "duration", res.Duration, "chains_deleted", res.Pruned)
	}
	if err != nil && ctx.Err() == nil {
		a.metrics.snap.errors.Inc()
		a.log.Warn("snapshot", "err", err)
	}
}

// stopSnapshots cancels the running round and waits for it: the session
// closes its tasks (and a rebuild may close the DB) only after.
func (s *session) stopSnapshots() {
	r := &s.snap
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// loadSnapshot gives task id the newest usable snapshot as its local
// state when it has none; called on the restoring task's goroutine before
// the task's stores open.
func (s *session) loadSnapshot(ctx context.Context, id topology.TaskID) error {
	a := s.app
	if a.snapStore == nil {
		return nil
	}
	started := false
	res, err := a.db.LoadSnapshot(ctx, a.snapStore, id.String(), func(m changelog.SnapshotManifest, loaded, total int) {
		if !started {
			started = true
			s.taskState(id, taskRestoring, "phase", "snapshot", "chain", m.Chain, "objects", total)
		}
	})
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if res.LocalState {
		return nil
	}
	switch {
	case res.Loaded && len(res.Skipped) > 0:
		a.metrics.snap.restores.WithLabelValues("fallback").Inc()
	case res.Loaded:
		a.metrics.snap.restores.WithLabelValues("loaded").Inc()
	case len(res.Skipped) > 0:
		a.metrics.snap.restores.WithLabelValues("failed").Inc()
	default:
		a.metrics.snap.restores.WithLabelValues("none").Inc()
	}
	if !res.Loaded {
		return nil
	}
	m := res.Manifest
	s.taskState(id, taskRestoring, "phase", "snapshot", "chain", m.Chain, "seq", m.Seq, "objects", res.Objects,
		"bytes", res.Bytes, "snapshot_duration", res.Duration, "chains_skipped", len(res.Skipped))
	if l, ok := a.cfg.RestoreListener.(SnapshotRestoreListener); ok {
		l.OnSnapshotLoaded(id, m.Chain, m.Seq, res.Bytes, m.ChangelogOffsets())
	}
	return nil
}

// snapshotMetrics are the App's snapshot metrics.
type snapshotMetrics struct {
	seconds  prometheus.Histogram
	bytes    prometheus.Counter
	errors   prometheus.Counter
	restores *prometheus.CounterVec
}

func newSnapshotMetrics(labels prometheus.Labels) *snapshotMetrics {
	return &snapshotMetrics{
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_snapshot_seconds",
			Help: "Duration of one task's snapshot (backup and manifest written to the snapshot store).", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_snapshot_bytes_total",
			Help: "Bytes of backups written to the snapshot store.", ConstLabels: labels}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_snapshot_errors_total",
			Help: "Snapshot rounds that failed for at least one task (retried at the next checkpoint).", ConstLabels: labels}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_snapshot_restores_total",
			Help:        "Tasks assigned without local state, by result: loaded (the newest chain), fallback (an older chain, a newer one was damaged), failed (chains exist, none usable: full changelog restore), none (no snapshot).",
			ConstLabels: labels}, []string{"result"}),
	}
}

func (m *snapshotMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.seconds, m.bytes, m.errors, m.restores}
}
