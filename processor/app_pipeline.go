package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/txn"
)

// Pipelined commits (issue #12, item 1): the record loop does not wait for
// EndTxn.
//
// A commit of transaction N runs its prepare on the loop as before: the
// changelog, sink and frontier records are flushed (acknowledged), every
// task's overlay is sealed (changelog.TaskState.Seal) and the input
// offsets N commits are pinned to what N processed (the fair queues'
// heads at that moment, txn.OffsetLimit). Then N's End (TxnOffsetCommit,
// the group heartbeat, EndTxn, and resolving an unknown outcome) runs on a
// goroutine the session owns (txn.Ending), and the loop goes on
// processing into N+1:
//
//   - N+1's state writes go to each task's live overlay, layered over N's
//     sealed one: reads see N+1 over N over the DB.
//   - N+1's sink and dead-letter records are staged in memory: kgo would
//     put anything produced before N's EndTxn returns into N, so they are
//     produced only once N+1 has begun, right after N settles. Its
//     changelog records are produced by its own commit's flush, later.
//   - kgo forbids polling (and producing, and Begin) while End runs, so the
//     loop processes only the records already queued by the fair
//     scheduler (app_fair.go); with nothing queued it waits for N.
//   - Staged records are bounded by Config.PipelineBudget bytes: when
//     they pass it the loop waits for N.
//
// When N's End returns the loop settles it (txn.Committer.Finish): a
// committed N is applied (its sealed overlays written to Badger, the
// frontier advanced) and N+1 begins with its staged records; an aborted N
// discards N+1 too (the live overlays were computed from N's state), and
// the tasks, the queues and the consumer rewind to the last commit, as
// after any abort (resetTasks). A revocation, a redo, a shutdown, a
// commit requested meanwhile (a window_final one included: it is chained
// right after N) and the end of the session all wait for N to settle first.
//
// Every commit reports the time the record loop was blocked by it,
// pipelined or not: as the commit's cost to the frontier controller
// (frontier.CommitAck.Cost, its trace's Blocked) and as the histogram
// tidemark_commit_loop_blocked_seconds. Without pipelining that is the
// whole commit; with it, the prepare, the waits for End and the settling.

// DefaultPipelineBudget is Config.PipelineBudget's default: the bytes of
// sink and dead-letter records (keys, values, headers) the record loop may
// stage while a transaction ends before it waits for it.
const DefaultPipelineBudget = 32 << 20

// WithPipelinedCommits sets Config.PipelinedCommits: whether the record
// loop keeps processing while a transaction ends (see app_pipeline.go).
// Default on. Pipelining applies under ExactlyOnce; AtLeastOnce commits
// block as before.
func WithPipelinedCommits(on bool) Option {
	return func(c *Config) { c.PipelinedCommits = &on }
}

// WithPipelineBudget sets Config.PipelineBudget, the bytes of output
// records staged while a transaction ends before the loop waits for it.
// bytes ≥ 1; NewApp rejects other values. Default DefaultPipelineBudget.
func WithPipelineBudget(bytes int) Option {
	return func(c *Config) { c.PipelineBudget = bytes }
}

// pipelinedDefault is PipelinedCommits' default: on. The exactly-once
// tests (the SIGKILL crash tests, the soak's kill and storm campaigns)
// pass with it on, and on the shared 2-core bench machine the count
// workload's p99 staleness was lower with it on in most side-by-side runs
// (geometric mean of six pairs ≈ 0.8×), throughput unchanged within the
// machine's noise. WithPipelinedCommits(false) restores blocking commits.
const pipelinedDefault = true

// pipelined reports whether commits are pipelined under c.
func (c *Config) pipelined() bool {
	if c.Guarantee != ExactlyOnce {
		return false
	}
	if c.PipelinedCommits == nil {
		return pipelinedDefault
	}
	return *c.PipelinedCommits
}

// pipelineBudget is PipelineBudget with its default.
func (c *Config) pipelineBudget() int {
	if c.PipelineBudget == 0 {
		return DefaultPipelineBudget
	}
	return c.PipelineBudget
}

// checkPipelineBudget validates Config.PipelineBudget.
func checkPipelineBudget(n int) error {
	if n < 0 {
		return fmt.Errorf("config: PipelineBudget %d must be ≥ 1 (0: the default %d)", n, DefaultPipelineBudget)
	}
	return nil
}

// pipeState is the session's pipelined commit: the transaction ending off
// the loop, if any, and the next one's staged output records.
type pipeState struct {
	flight      *flight
	staged      []stagedOutput
	stagedBytes int
}

// flight is transaction N, ending on its goroutine.
type flight struct {
	e      *txn.Ending
	reason string
	start  time.Time     // when the commit started
	txn    *txnState     // N's outputs, acknowledged when it commits
	done   chan struct{} // closed when End returned
	cancel context.CancelFunc
	// blocked is the record loop's time spent on this commit: its
	// prepare, its waits for End, its settling.
	blocked time.Duration
	// idle is the part of blocked the loop spent waiting for End with
	// nothing queued to process: it held back polling, so it delays the
	// records arriving meanwhile, but it took no processing capacity, so
	// the controller does not count it in the commit's cost.
	idle time.Duration
}

// stagedOutput is an output record of N+1 waiting for N+1 to begin.
type stagedOutput struct {
	r          *kgo.Record
	deadLetter bool
}

// pinnedLimit is the context key under which a pipelined End finds the
// offset limit pinned when its transaction was sealed: the fair queues'
// heads move on while it runs (queuedOffsets.End).
type pinnedLimit struct{}

// canPipeline: pipelining is on and nothing asks for a blocking commit (a
// rejected output being isolated produces record by record).
func (s *session) canPipeline() bool {
	return s.app.cfg.pipelined() && s.gts != nil && !s.th.isolate
}

// commitPipelined prepares and seals the open transaction on the loop and
// hands its End to a goroutine. A prepare failure aborts at once, as a
// blocking commit's does.
func (s *session) commitPipelined(ctx context.Context, reason string) error {
	start, err := s.startCommit()
	if err != nil {
		return err
	}
	// Pinned on the loop, before anything of N+1 is processed.
	lim := s.fair.limit()
	pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), s.app.cfg.TransactionTimeout)
	e, st, err := s.committer.Seal(pctx)
	pcancel()
	if err != nil {
		// Not sealed: a failed prepare aborted (PrepareError), or the
		// machine refused. The blocking path's handling applies.
		return s.committed(reason, start, s.txn, st, err, s.now().Sub(start), 0)
	}
	for _, lt := range s.tasks { // every one prepared: a participant
		if err := lt.state.Seal(); err != nil {
			// Only a bug gets here (every task was flushed); end the
			// session rather than guess at the overlays.
			return fmt.Errorf("%w: seal task %s: %v", errFatal, lt.task.ID(), err)
		}
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.app.cfg.TransactionTimeout)
	ectx = context.WithValue(ectx, pinnedLimit{}, lim)
	f := &flight{e: e, reason: reason, start: start, txn: s.txn, done: make(chan struct{}), cancel: cancel}
	s.txn = &txnState{}
	s.txn.reset()
	s.pipe.flight = f
	go func() {
		defer close(f.done)
		e.End(ectx)
	}()
	f.blocked = s.now().Sub(start)
	return nil
}

// settleWait says whether settleFlight waits for End and, if it does,
// whether the loop had work it could not do meanwhile.
type settleWait int

const (
	noWait      settleWait = iota
	waitBlocked            // the loop has queued records, or must act between transactions
	waitIdle               // nothing is queued: the wait only holds back polling
)

// settleFlight settles transaction N once its End returned; unless how is
// noWait it waits for that (the wait counts as blocked time, and as idle
// with waitIdle). It returns whether N aborted (the tasks and inputs
// rewound, N+1 discarded). With nothing in flight it does nothing.
func (s *session) settleFlight(ctx context.Context, how settleWait) (aborted bool, err error) {
	f := s.pipe.flight
	if f == nil {
		return false, nil
	}
	if how != noWait {
		t0 := s.now()
		<-f.done
		d := s.now().Sub(t0)
		f.blocked += d
		if how == waitIdle {
			f.idle += d
		}
	} else {
		select {
		case <-f.done:
		default:
			return false, nil
		}
	}
	s.pipe.flight = nil
	f.cancel()
	t0 := s.now()
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.app.cfg.TransactionTimeout)
	defer cancel()
	st, ferr := s.committer.Finish(actx, f.e)
	if !st.Committed {
		// N aborted, or its outcome is unknown: N+1 was computed from
		// it and goes too (resetTasks drops the staged records). The
		// live overlays went with the sealed ones in Discard.
		s.dropStaged()
		s.txn.reset()
		err := s.committed(f.reason, f.start, f.txn, st, ferr, f.blocked+s.now().Sub(t0), f.idle)
		return true, err
	}
	// N committed: N+1 begins with what it staged, unless the session
	// must restart (an End error resolved as committed): the next session
	// redoes N+1 from the committed offsets.
	if ferr != nil {
		s.dropStaged()
	}
	if len(s.pipe.staged) > 0 {
		if berr := s.committer.Begin(); berr != nil {
			s.dropStaged()
			return false, fmt.Errorf("%w: begin: %v", errRestartSession, berr)
		}
		s.began = s.now()
		staged := s.pipe.staged
		s.pipe.staged, s.pipe.stagedBytes = nil, 0
		for _, o := range staged {
			if perr := s.produceOutput(o.r, o.deadLetter); perr != nil {
				ferr = errors.Join(ferr, perr)
			}
		}
	}
	return false, s.committed(f.reason, f.start, f.txn, st, ferr, f.blocked+s.now().Sub(t0), f.idle)
}

// stageOutput keeps an output record of N+1 until N settles.
func (s *session) stageOutput(r *kgo.Record, deadLetter bool) {
	s.pipe.staged = append(s.pipe.staged, stagedOutput{r: r, deadLetter: deadLetter})
	s.pipe.stagedBytes += recordBytes(r)
}

// dropStaged forgets N+1's staged records: N+1 is being rewound.
func (s *session) dropStaged() {
	clear(s.pipe.staged)
	s.pipe.staged, s.pipe.stagedBytes = nil, 0
}

// staging reports whether output records must be staged: a transaction
// is ending off the loop.
func (s *session) staging() bool { return s.pipe.flight != nil }

// overBudget reports whether the staged records passed the budget: the
// pass stops (processPass) and the loop waits for the transaction in
// flight (pipelineTurn).
func (s *session) overBudget() bool {
	return s.pipe.flight != nil && s.pipe.stagedBytes >= s.app.cfg.pipelineBudget()
}

// yieldPass reports whether a pass must stop before its next record for
// the transaction in flight: the budget is spent, or its End returned and
// it is to be settled now, so that the next commit (a window_final one
// above all) is not held back by the rest of the pass.
func (s *session) yieldPass() bool {
	f := s.pipe.flight
	if f == nil {
		return false
	}
	if s.overBudget() {
		return true
	}
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// pipelineTurn is the loop's turn on the transaction in flight: it
// settles it if its End returned, and waits for it when the loop has
// nothing it may do meanwhile (no queued record to process: polling is
// not allowed while End runs), when the staging budget is spent, or when
// the assignment changed (a revocation is handled between transactions).
func (s *session) pipelineTurn(ctx context.Context) error {
	if s.pipe.flight == nil {
		return nil
	}
	how := noWait
	switch {
	case s.overBudget() || s.assignmentChanged():
		how = waitBlocked
	case !s.runnable():
		how = waitIdle
	}
	_, err := s.settleFlight(ctx, how)
	return err
}

// assignmentChanged reports a pending assignment change, without taking it.
func (s *session) assignmentChanged() bool {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	return s.changed || s.revoked
}

// drainFlight waits for the transaction in flight at the end of the
// session and settles it, logging what fails: its goroutine must not
// outlive the session's client.
func (s *session) drainFlight() {
	if s.pipe.flight == nil {
		return
	}
	if _, err := s.settleFlight(s.ctx, waitBlocked); err != nil {
		s.app.log.Warn("settle the transaction in flight at the end of the session", "err", err)
	}
}

// pipeMetrics are the pipelined commits' metrics.
type pipeMetrics struct {
	blocked prometheus.Histogram
}

func newPipeMetrics(labels prometheus.Labels, buckets []float64, register func(prometheus.Collector)) *pipeMetrics {
	m := &pipeMetrics{
		blocked: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_commit_loop_blocked_seconds",
			Help:        "Per commit, the time the record loop could not process because of it: the whole commit when it blocks; with pipelined commits its prepare, the waits for its EndTxn and its settling.",
			ConstLabels: labels, Buckets: buckets}),
	}
	register(m.blocked)
	return m
}

// observeBlocked reports a settled commit's blocked time to the metric and
// its cost, the processing time it took (blocked less idle), to the
// controller.
func (s *session) observeBlocked(end time.Time, blocked, idle time.Duration) {
	s.app.metrics.pipe.blocked.Observe(blocked.Seconds())
	s.ctrl.ObserveCommitFinished(end, frontier.CommitAck{Cost: max(blocked-idle, time.Nanosecond)})
}
