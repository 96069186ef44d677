package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/txn"
)

// commit runs the commit protocol (package txn) over the transaction's
// participants: every task (its changelog records and resume point) and
// the outputs (sink and frontier records). An abort resets the tasks to
// the committed state; a failure that needs a new producer returns
// errRestartSession.
func (s *session) commit(ctx context.Context, reason string) error {
	// A commit asked for while one is in flight (app_pipeline.go) is
	// chained right after it.
	if _, err := s.settleFlight(ctx, waitBlocked); err != nil {
		return err
	}
	if s.revokedInTxn() {
		return s.abortForRevoke(ctx)
	}
	if redone, err := s.flushTasks(ctx); err != nil || redone {
		return err
	}
	s.markTxnStart()
	if s.canPipeline() {
		return s.commitPipelined(ctx, reason)
	}
	// A commit that has started runs to its end even when Run's context
	// is cancelled meanwhile: cancelling its flush would abort the work a
	// graceful shutdown is about to commit. The transaction timeout bounds
	// it instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.app.cfg.TransactionTimeout)
	defer cancel()
	start, err := s.startCommit()
	if err != nil {
		return err
	}
	st, err := s.committer.Commit(ctx)
	return s.committed(reason, start, s.txn, st, err, s.now().Sub(start), 0)
}

// startCommit opens the transaction if nothing has yet, stages the
// tasks' input positions in it and tells the controller and the
// checkpoint policy a commit starts now.
func (s *session) startCommit() (time.Time, error) {
	if err := s.begin(); err != nil {
		return time.Time{}, err
	}
	start := s.now()
	s.ctrl.ObserveCommitStarted(start)
	s.stagePositions()
	for _, lt := range s.tasks {
		s.ckpt.ObserveChangelogWrites(start, lt.state.Pending())
	}
	return start, nil
}

// committed handles the end of a commit that started at start: a
// committed transaction t is acknowledged, an aborted one rewinds the
// tasks, a failure that needs a new producer returns errRestartSession.
// blocked is the record loop's time the commit took, idle the part of it
// with nothing to process (app_pipeline.go).
func (s *session) committed(reason string, start time.Time, t *txnState, st txn.Stats, err error, blocked, idle time.Duration) error {
	end := s.now()
	s.app.purge.observe(st) // only a committed attempt's offsets count
	var prepErr *txn.PrepareError
	switch {
	case st.Committed:
		s.app.prunePoison(st.Offsets)
		s.th.isolate, s.th.commitRejects = false, 0
		s.observeBlocked(end, blocked, idle)
		phases := [3]time.Duration{st.Prepare, st.End, st.Apply}
		s.app.metrics.observeCommit(reason, end.Sub(start), phases)
		s.th.commitWatch.observe(end, s.app.log, reason, phases)
		s.app.threadMetrics().commits.WithLabelValues(strconv.Itoa(s.th.index)).Inc()
		s.acknowledge(end, t)
		if err != nil && changelog.IsCorrupt(err) {
			// Committed, and local state is behind the commit because
			// applying it found the state damaged (its directory
			// removed, say): rebuild it from the changelogs.
			return fmt.Errorf("%w: %v", errCorruptState, err)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errRestartSession, err)
		}
		return nil
	case errors.As(err, &prepErr):
		if open, past := s.openPastTimeout(); past {
			// The broker aborted it and bumped the epoch: the client
			// reports INVALID_PRODUCER_EPOCH, not a timeout.
			s.app.log.Warn("aborted transaction: it was open past TransactionTimeout and the broker aborted it (the record loop stalled)",
				"open", open.Round(time.Millisecond), "transaction_timeout", s.app.cfg.TransactionTimeout, "reason", prepErr.Err)
		} else {
			s.app.log.Warn("aborted transaction", "reason", prepErr.Err)
		}
		t.mu.Lock()
		rejectedOutput, unknownTopic := t.rejected, t.unknownTopic
		t.mu.Unlock()
		aerr := s.aborted(prepErr.AbortErr, abortPrepare)
		if errors.Is(prepErr.Err, changelog.ErrNoSpace) {
			// Aborted, so nothing is committed past the state; a redo
			// would only fail the same way until someone frees space.
			return fmt.Errorf("processor: %w: %w", errFatal, prepErr.Err)
		}
		// An output rejected in a batch is found by the isolated redo and
		// left to the handler; only what is rejected after that counts.
		if isolating := rejectedOutput && !s.th.isolate; !isolating {
			if err := s.commitRejected(prepErr.Err); err != nil {
				return err
			}
		}
		if err := s.topicGone(unknownTopic, prepErr.Err); err != nil {
			return err
		}
		if rejectedOutput && !s.th.isolate {
			// Redo it producing outputs one by one, to find out which
			// input record the rejected output came from. Set before the
			// abort's error returns: under at-least-once every abort
			// restarts the session (aborted), and the redo runs in the
			// next one; without isolation it would be refused in a batch
			// again, forever, and no input record would ever be blamed.
			s.app.log.Warn("an output was rejected; redoing the transaction one output at a time to find its input record")
			s.th.isolate = true
		}
		if aerr != nil {
			return aerr
		}
		return nil
	case err != nil && restartable(err):
		s.ctrl.ObserveCommitAborted(end)
		// The failure is counted into the shared hazard when the
		// session ends (App.loop, app_hazard.go).
		// Both wrapped: restartCause names the cause (fenced,
		// outcome_unknown) and the tasks are logged fenced.
		return fmt.Errorf("%w: %w", errRestartSession, s.timedOut(err))
	default:
		// Aborted: by the session (a rebalance) or after an End error
		// resolved as not committed.
		s.ctrl.ObserveCommitAborted(end)
		if err != nil {
			s.app.metrics.aborts.WithLabelValues(abortEnd).Inc()
			s.app.log.Warn("transaction aborted", "err", err)
			if rerr := s.resetTasks(); rerr != nil {
				return rerr
			}
			return fmt.Errorf("%w: %v", errRestartSession, err)
		}
		if s.revokedInTxn() {
			s.app.metrics.aborts.WithLabelValues(abortRevoked).Inc()
			s.app.log.Info("transaction aborted by the session: partitions were revoked while it ended")
		} else {
			s.app.metrics.aborts.WithLabelValues(abortSession).Inc()
			s.app.log.Warn("transaction aborted by the session: the group coordinator turned its offsets away (a new generation, CONCURRENT_TRANSACTIONS, a coordinator move) or group membership could not be confirmed before EndTxn; redoing it")
		}
		return s.resetTasks()
	}
}

func (s *session) abort(ctx context.Context, cause string) error {
	_, err := s.committer.Abort(ctx)
	return s.aborted(err, cause)
}

// aborted rewinds after the transaction was aborted for cause; err is the
// abort's.
func (s *session) aborted(err error, cause string) error {
	s.ctrl.ObserveCommitAborted(s.now())
	s.app.metrics.aborts.WithLabelValues(cause).Inc()
	if err != nil && restartable(err) {
		return fmt.Errorf("%w: %w", errRestartSession, s.timedOut(err))
	}
	if s.gts == nil {
		// Under at-least-once nothing rewinds the consumer (the
		// transactional session does that on abort): going on would skip
		// the aborted inputs, whose state writes were just dropped. A new
		// session resumes from the committed offsets.
		return fmt.Errorf("%w: at-least-once work aborted; resuming from the committed offsets", errRestartSession)
	}
	if rerr := s.resetTasks(); rerr != nil {
		return rerr
	}
	if err != nil {
		return fmt.Errorf("%w: abort: %v", errRestartSession, err)
	}
	return nil
}

// outputs is the transaction's participant for what the tasks produced to
// sinks and dead-letter topics, and the output frontier records that name
// their offsets.
type outputs struct{ s *session }

// Prepare makes every output acknowledged, so the sink offsets the
// frontier names are known, then adds the frontier records.
func (o outputs) Prepare(ctx context.Context) (txn.Metadata, error) {
	s := o.s
	if err := s.producer.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush outputs: %w", err)
	}
	s.txn.mu.Lock()
	err := s.txn.err
	s.txn.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return nil, s.produceFrontier(ctx)
}

// Apply makes the committed frontier this instance's published one.
func (o outputs) Apply(context.Context) error {
	o.s.advanceFrontier()
	return nil
}

// Discard forgets the aborted transaction's frontier records.
func (o outputs) Discard() {
	_, ss := o.s.frontierState()
	ss.pending = nil
}

func (s *session) acknowledge(now time.Time, t *txnState) {
	t.mu.Lock()
	oldest, outputs, deadLettered, undecodable := t.oldest, t.outputs, t.deadLettered, t.undecodable
	for sink, o := range t.oldestBySink {
		if !s.app.topo.IsRepartitionTopic(sink) {
			s.app.ui.observeStaleness(sink, now, now.Sub(o))
		}
	}
	s.app.tenants.observe(now, t.byTenant, s.app.metrics)
	t.mu.Unlock()
	if !oldest.IsZero() {
		s.app.metrics.observedStaleness.Observe(now.Sub(oldest).Seconds())
	}
	s.app.metrics.recordsOut.Add(float64(outputs))
	s.app.metrics.deadLettered.Add(float64(deadLettered))
	s.app.metrics.deserializationErrors.Add(float64(undecodable))
	s.app.publishSnapshot(s.th, s.th.commitTotals.onto(s.ctrl.Snapshot()))
	t.reset()
}

// shutdown commits what is open, with a fresh deadline since ctx is done.
func (s *session) shutdown() error {
	if !s.dirty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	err := s.commit(ctx, "shutdown")
	if err == nil {
		_, err = s.settleFlight(ctx, waitBlocked) // the last commit ends before the session does
	}
	if errors.Is(err, errRestartSession) {
		s.app.log.Warn("final commit failed; the next instance reprocesses from the last commit", "err", err)
		return nil
	}
	return err
}

// abandon aborts the transaction a fatal error left open, so its records
// never become visible and read_committed consumers of its partitions are
// not held at the last stable offset until the transaction times out.
func (s *session) abandon() {
	s.drainFlight()
	if !s.committer.Open() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if _, err := s.committer.Abort(ctx); err != nil {
		s.app.log.Warn("abort the transaction left open by a failure", "err", err)
	}
}

// deadLetter writes a bad input record, raw, to the dead-letter topic
// inside the transaction, so skipping it commits together with its offset.
// Its headers say why (kind: deserialization, processing or production),
// where it failed and where it came from.
func (s *session) deadLetter(_ context.Context, r *kgo.Record, kind, operator string, cause error) error {
	if err := s.begin(); err != nil {
		return err
	}
	dl := &kgo.Record{
		Topic: s.app.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
		Partition: 0,
		Headers: append(append([]kgo.RecordHeader(nil), r.Headers...),
			kgo.RecordHeader{Key: "tidemark.error", Value: []byte(cause.Error())},
			kgo.RecordHeader{Key: "tidemark.error.kind", Value: []byte(kind)},
			kgo.RecordHeader{Key: "tidemark.source.topic", Value: []byte(r.Topic)},
			kgo.RecordHeader{Key: "tidemark.source.partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
			kgo.RecordHeader{Key: "tidemark.source.offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
		),
	}
	if operator != "" {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: "tidemark.operator", Value: []byte(operator)})
	}
	if n, err := s.app.layout.partitionCount(dl.Topic); err == nil {
		dl.Partition = task.DefaultPartition(r.Key, n)
	}
	s.txn.mu.Lock()
	s.txn.deadLettered++
	if kind == "deserialization" {
		s.txn.undecodable++
	}
	s.txn.mu.Unlock()
	return s.produceOutput(dl, true)
}
