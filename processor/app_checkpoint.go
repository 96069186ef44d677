package processor

import (
	"context"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
)

// checkpointRun is the session's checkpoint in flight, if any. A
// checkpoint (Badger syncs of every open task DB) runs on a goroutine of
// its own, so the record loop goes on processing and committing while the
// disk works; the loop starts at most one at a time, collects its result
// (the measured cost δ for the scheduler) when it finishes, and waits for
// it when the session closes. Syncing while the loop applies new commits
// is safe (changelog.DB.Checkpoint holds each task DB open for its
// duration) and loses nothing: the checkpoint makes durable at least what
// was applied when it started, which is what the scheduler counts it for.
type checkpointRun struct {
	done   chan checkpointResult // nil when none is running
	reason string                // why it was started
}

type checkpointResult struct {
	cost changelog.CheckpointCost
	took time.Duration // wall time of the whole call
	err  error
}

// tickCheckpoint collects a finished checkpoint, asks the scheduler whether
// to start one, and starts it off the loop. It returns the scheduler's
// wake-up time. A checkpoint may start while a transaction is open: Badger
// holds only applied, committed state (the open transaction's writes are
// in the overlay, changelog/doc.go), so the sync covers a committed state
// whatever the loop is doing. Waiting for a turn with no transaction open
// starved checkpoints under steady input (with pipelined commits the next
// transaction opens before the previous one ends): a checkpoint due every
// 300 ms ran about every 5 s, and so did the snapshots that follow it. It
// does not start while a pipelined End is in flight, whose Apply follows.
func (s *session) tickCheckpoint(ctx context.Context, now time.Time) time.Time {
	s.collectCheckpoint(false)
	cd := s.ckpt.Tick(now)
	start := cd.Checkpoint && !s.staging() && s.ckptRun.done == nil
	s.app.hazard.Load().observeCheckpointDecision(now, cd, start)
	if start {
		s.app.log.Debug("checkpoint", "reason", cd.Reason.String(), "interval", cd.Interval, "daly", cd.Daly,
			"cap", cd.Cap, "cost", cd.Cost, "mtbf", cd.MTBF, "replay", cd.Replay)
		s.ckpt.ObserveCheckpointStarted(now)
		done := make(chan checkpointResult, 1)
		s.ckptRun.done, s.ckptRun.reason = done, cd.Reason.String()
		db := s.app.db
		go func() {
			t0 := time.Now()
			cost, err := db.Checkpoint(ctx)
			done <- checkpointResult{cost: cost, took: time.Since(t0), err: err}
		}()
	}
	return cd.Wake
}

// collectCheckpoint feeds the result of the checkpoint in flight, if it
// finished (or, with wait, once it finishes), to the scheduler, the
// metrics and the trace.
func (s *session) collectCheckpoint(wait bool) {
	if s.ckptRun.done == nil {
		return
	}
	var res checkpointResult
	if wait {
		res = <-s.ckptRun.done
	} else {
		select {
		case res = <-s.ckptRun.done:
		default:
			return
		}
	}
	s.ckptRun.done = nil
	reason := s.ckptRun.reason
	s.app.hazard.Load().observeCheckpointDone(res.took, res.cost.Bytes, res.err)
	if res.err != nil {
		s.ckpt.ObserveCheckpointFailed(s.now())
		s.app.log.Warn("checkpoint", "err", res.err)
		return
	}
	s.ckpt.ObserveCheckpointFinished(s.now(), res.cost.Duration)
	s.app.metrics.checkpoints.WithLabelValues(reason).Inc()
	s.app.metrics.checkpointSeconds.Observe(res.cost.Duration.Seconds())
	if !wait {
		// Snapshots (app_snapshot.go) copy what the checkpoint made
		// durable, on their own goroutine; none starts as the session
		// closes.
		s.snapshot()
	}
}

// WithCheckpointPolicy configures the checkpoint scheduler: Daly's rule
// for the measured checkpoint cost and the learned failure hazard (whose
// prior is o.MeanTimeBetweenFailures), capped so that a crash replays at
// most o.RestoreTarget of changelog. Zero fields take frontier's defaults.
func WithCheckpointPolicy(o frontier.CheckpointOptions) Option {
	return func(c *Config) { c.Checkpoint = o }
}
