package processor

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// Restores run off the record loop.
//
// A task whose partitions the group assigns is opened and restored from
// its changelogs on a goroutine of its own (startRestore), while the loop
// goes on processing the instance's running tasks and the queries of their
// stores are served. Until the restore finishes, the task is not a
// transaction participant (it has nothing to commit), not queryable, and
// its input partitions are not fetched: the session pauses every newly
// assigned partition in the group's assignment callback, before kgo starts
// fetching it (session.onAssigned), and resumes a task's partitions only
// once the task runs. kgo neither returns records of a paused partition
// nor moves its fetch position (buffered records are dropped and fetched
// again after the resume), so nothing is skipped, reordered, or committed
// past: the transaction commits only offsets of records a running task
// processed, exactly as before.
//
// The loop promotes a finished restore (promoteRestored) at the top of its
// next turn, with or without a transaction open: the committer asks for
// the participants at each commit and abort, so the task takes part from
// the transaction it joins on, as a task opened for partitions assigned
// during a poll always has (an abort rewinds it to the resume point it was
// opened with, like any other). Waiting for a commit boundary instead
// would hold a restored task back for a whole commit interval. A failed
// restore ends the session with its error, as a failed synchronous open
// did. A revocation, the session's close or the App's
// context cancels the restore and waits for its goroutine to finish, so
// the task's Badger DB is closed before anything else may open it. A
// cancelled restore leaves the offsets Badger had; the next restore
// replays from them (changelog.TaskState.Restore is idempotent).

// RestoreListener hears of the changelog restores of an App's tasks, the
// way Kafka Streams' StateRestoreListener does: for each changelog
// partition (one per logged store of a task) that has records to read,
// OnRestoreStart once with the offsets the restore reads from and to,
// OnBatchRestored after each batch is applied (a fetch's records of the
// partition, cut every 10,000 records; with the batch's last offset and
// the records it applied, as commit markers move the offset but count no
// records), and OnRestoreEnd with the total once the task's whole
// restore is written, before the task starts running. The totals equal the
// sums of the batches. A restore cancelled by a revocation or a shutdown,
// or one that fails, ends without OnRestoreEnd; the task's next restore
// starts over with OnRestoreStart. Stores already up to date hear nothing.
//
// The methods are called on the restoring task's own goroutine, not the
// record loop: calls for one task are sequential, but several tasks may
// restore at once, so an implementation must be safe for concurrent use.
// They should return quickly; the restore waits for them.
type RestoreListener interface {
	OnRestoreStart(task topology.TaskID, store string, changelog changelog.TopicPartition, startOffset, endOffset int64)
	OnBatchRestored(task topology.TaskID, store string, changelog changelog.TopicPartition, batchEndOffset, restored int64)
	OnRestoreEnd(task topology.TaskID, store string, changelog changelog.TopicPartition, totalRestored int64)
}

// WithRestoreListener installs Config.RestoreListener.
func WithRestoreListener(l RestoreListener) Option {
	return func(c *Config) { c.RestoreListener = l }
}

// taskRestoreListener passes one task's changelog.RestoreListener calls on
// with the task's id.
type taskRestoreListener struct {
	id topology.TaskID
	l  RestoreListener
}

func (t taskRestoreListener) OnRestoreStart(tp changelog.TopicPartition, store string, from, to int64) {
	t.l.OnRestoreStart(t.id, store, tp, from, to)
}

func (t taskRestoreListener) OnBatchRestored(tp changelog.TopicPartition, store string, end, n int64) {
	t.l.OnBatchRestored(t.id, store, tp, end, n)
}

func (t taskRestoreListener) OnRestoreEnd(tp changelog.TopicPartition, store string, total int64) {
	t.l.OnRestoreEnd(t.id, store, tp, total)
}

// restoringTask is a task being opened and restored on its own goroutine.
// Its result fields are written by that goroutine before done closes and
// read by the loop after.
type restoringTask struct {
	out    *heldOutput // the task's Output: held until promoted
	cancel context.CancelFunc
	done   chan struct{}
	lt     *liveTask
	res    changelog.RestoreResult
	err    error
}

// startRestore opens task id and restores its stores on a new goroutine,
// once prep (the assignment change's fence and offsets) is done. ctx is
// the App's: its cancellation ends the restore too.
func (s *session) startRestore(ctx context.Context, id topology.TaskID, prep *taskPrep) {
	rctx, cancel := context.WithCancel(ctx)
	rt := &restoringTask{out: &heldOutput{s: s}, cancel: cancel, done: make(chan struct{})}
	s.restoring[id] = rt
	go func() {
		defer close(rt.done)
		// A standby's DB handed over to this task (syncStandbys) and not
		// taken closes now: the open failed before the stores opened, or
		// never ran (the preparation failed, or stopRestore cancelled it
		// while waiting), which left the DB open for good.
		defer s.app.db.EndHandOver(id.String())
		if rt.err = prep.wait(rctx); rt.err != nil {
			return
		}
		rt.lt, rt.res, rt.err = s.openTask(rctx, id, s.resumeState(prep.resume, id), rt.out)
	}()
}

// stopRestore cancels a restore and waits for its goroutine; a task it
// finished opening meanwhile is closed.
func (s *session) stopRestore(id topology.TaskID, rt *restoringTask) {
	rt.cancel()
	<-rt.done
	s.app.ha.endRestoring(id)
	if rt.lt != nil {
		if err := rt.lt.close(); err != nil {
			s.app.log.Warn("close restored task", "task", id.String(), "err", err)
		}
		rt.lt = nil
	}
}

// stopRestores stops every restore of the session (its close), logging
// each task's end state.
func (s *session) stopRestores(state string, attrs []any) {
	for _, rt := range s.restoring {
		rt.cancel() // all at once, then wait for each
	}
	for id, rt := range s.restoring {
		s.stopRestore(id, rt)
		s.taskState(id, state, attrs...)
	}
	clear(s.restoring)
}

// promoteRestored makes the tasks whose restore finished running: they
// join the transaction's participants, become queryable, and their input
// partitions are fetched again. A failed restore ends the session with its
// error (unless the App is shutting down, which cancelled it).
func (s *session) promoteRestored(ctx context.Context) error {
	var promoted []topology.TaskID
	for id, rt := range s.restoring {
		select {
		case <-rt.done:
		default:
			continue
		}
		if rt.err != nil {
			if ctx.Err() != nil {
				continue // shutting down: the loop's next turn ends the session
			}
			delete(s.restoring, id)
			s.app.ha.endRestoring(id)
			s.app.metrics.forgetTask(id.String())
			s.taskState(id, taskClosed, "reason", "open failed")
			return rt.err
		}
		delete(s.restoring, id)
		lt, res := rt.lt, rt.res
		if res.Records > 0 {
			s.ckpt.ObserveRestore(res.Records, res.Duration)
			s.ctrl.ObserveRestoreTime(res.Duration)
		}
		s.tasks[id] = lt
		if err := rt.out.release(); err != nil {
			return err
		}
		s.queryPublish(ctx, id, lt)
		s.taskState(id, taskRunning, "restored", res.Records, "restore_duration", res.Duration, "rebuilt", len(res.Rebuilt))
		promoted = append(promoted, id)
	}
	if len(promoted) == 0 {
		return nil
	}
	s.index()
	s.resumeRunning()
	s.app.setThreadTasks(s.th, len(s.tasks))
	s.app.ha.setActive(s.th.index, s.sortedTaskIDs())
	for _, id := range promoted {
		s.app.ha.endRestoring(id)
	}
	if len(s.restoring) == 0 {
		s.app.setReady(s.th, true)
	}
	s.app.log.Info("tasks running", "tasks", len(s.tasks), "restoring", len(s.restoring))
	return nil
}

// pauseAssigned stops kgo from fetching newly assigned partitions until
// their task runs (resumeRunning). It is called from the assignment
// callback, which kgo runs before it starts fetching them.
func pauseAssigned(cl *kgo.Client, added map[string][]int32) {
	if len(added) > 0 {
		cl.PauseFetchPartitions(maps.Clone(added))
	}
}

// resumeRunning resumes fetching the paused input partitions of the
// running tasks: those just restored, and those of tasks that kept running
// across a rebalance that assigned their partitions anew.
func (s *session) resumeRunning() {
	paused := s.cl.PauseFetchPartitions(nil)
	if len(paused) == 0 {
		return
	}
	resume := map[string][]int32{}
	for topic, ps := range paused {
		for _, p := range ps {
			if _, ok := s.byInput[changelog.TopicPartition{Topic: topic, Partition: p}]; ok {
				resume[topic] = append(resume[topic], p)
			}
		}
	}
	if len(resume) > 0 {
		s.cl.ResumeFetchPartitions(resume)
	}
}

// heldOutput is the Output of a task opened on its restore goroutine. A
// processor's Init, which runs there, may emit (Processor API); those
// records are held, copied, and collected into the session's transaction
// by the loop when it promotes the task (release), so that nothing of the
// transaction is touched off the loop. From then on it passes records
// straight to the session. live is only read and written by the goroutine
// running the task: the restore goroutine until it ends, the loop after.
type heldOutput struct {
	s    *session
	live bool
	held []heldRecord
}

type heldRecord struct {
	id  topology.TaskID
	rec topology.OutputRecord
}

func (h *heldOutput) Collect(id topology.TaskID, rec *topology.OutputRecord) error {
	if h.live {
		return h.s.Collect(id, rec)
	}
	c := *rec
	c.Key, c.Value = bytes.Clone(rec.Key), bytes.Clone(rec.Value)
	c.Headers = slices.Clone(rec.Headers)
	for i := range c.Headers {
		c.Headers[i].Value = bytes.Clone(c.Headers[i].Value)
	}
	h.held = append(h.held, heldRecord{id, c})
	return nil
}

// release collects the held records, in order, and makes h pass records
// on from now on. The loop calls it when it promotes the task.
func (h *heldOutput) release() error {
	h.live = true
	for _, r := range h.held {
		if err := h.s.Collect(r.id, &r.rec); err != nil {
			return fmt.Errorf("processor: collect the outputs task %s emitted in Init: %w", r.id, err)
		}
	}
	h.held = nil
	return nil
}
