package processor

import (
	"context"
	"fmt"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// liveTask is a Task in the service: the task core plus its stores' overlay
// and changelog (changelog.TaskState). It is a participant of the
// transaction (txn.Participant): Prepare flushes its changelog records and
// names its resume point for the offset metadata, Apply writes the overlay
// with the changelog offsets and input position it reflects.
type liveTask struct {
	app     string // the application id: changelog topic names
	task    *task.Task
	state   *changelog.TaskState
	flushed changelog.ChangelogOffsets // from Prepare's Flush: what Apply records
	// resume is what the last commit stored (or the task resumed from):
	// an abort rewinds the task's clocks to it, and the next commit's
	// changelog positions start from it. next is the resume point of the
	// commit being prepared; Apply makes it resume.
	resume, next resumePoint
	// position is the input position the commit being made reflects,
	// recorded with the state by Apply (stagePositions, app_queryable.go).
	position changelog.InputPosition
	// floor is the input position the restored state already reflects
	// (its changelogs carry it): records below it were processed and
	// committed before, whatever the group's committed offsets say, and
	// are skipped (app_reflected.go). Entries go once passed.
	floor changelog.InputPosition
	// release gives the task's lease back (app_threads.go) once its
	// state is closed.
	release func()
}

func (lt *liveTask) Prepare(ctx context.Context) (txn.Metadata, error) {
	offs, err := lt.state.Flush(ctx)
	if err != nil {
		return nil, fmt.Errorf("flush changelog of task %s: %w", lt.task.ID(), err)
	}
	lt.flushed = offs
	var md txn.Metadata
	lt.next, md = lt.nextResume(offs)
	return md, nil
}

func (lt *liveTask) Apply(context.Context) error {
	if err := lt.state.ApplyAt(lt.flushed, lt.position); err != nil {
		return fmt.Errorf("task %s: %w", lt.task.ID(), err)
	}
	lt.flushed = nil
	lt.resume, lt.next = lt.next, resumePoint{}
	return nil
}

func (lt *liveTask) Discard() {
	lt.state.Discard()
	lt.flushed = nil
	lt.next = resumePoint{}
}

func (lt *liveTask) close() error {
	err := lt.task.Close()
	if cerr := lt.state.Close(); err == nil {
		err = cerr
	}
	if lt.release != nil {
		lt.release()
	}
	return err
}

// openTask creates the task for (sub-topology, partition), opening its
// stores on the shared DB and restoring them from their changelogs.
//
// It runs on the task's restore goroutine (startRestore), so it touches
// nothing of the session's loop-owned state: the caller records the
// restore with the commit and checkpoint controllers and logs the task
// running once it promotes it.
// out is the task's Output (heldOutput: Init may emit).
func (s *session) openTask(ctx context.Context, id topology.TaskID, resume resumePoint, out task.Collector) (*liveTask, changelog.RestoreResult, error) {
	a := s.app
	// One user of the task's local state at a time: a sibling stream
	// thread that ran the task may still be closing it (app_threads.go).
	release, err := a.leases.acquire(ctx, id, fmt.Sprintf("thread %d task", s.th.index))
	if err != nil {
		return nil, changelog.RestoreResult{}, err
	}
	lt, res, err := s.openLeased(ctx, id, resume, out)
	if err != nil {
		release()
		return nil, res, err
	}
	lt.release = release
	return lt, res, nil
}

// openLeased is openTask once the task's lease is held.
func (s *session) openLeased(ctx context.Context, id topology.TaskID, resume resumePoint, out task.Collector) (*liveTask, changelog.RestoreResult, error) {
	a := s.app
	if err := s.loadSnapshot(ctx, id); err != nil {
		return nil, changelog.RestoreResult{}, err
	}
	state := a.db.NewTaskState(changelog.TaskStateConfig{
		ID:        id.String(), // the task's Badger DB: <StateDir>/tasks/<id>
		AppID:     a.topo.Application(),
		Partition: id.Partition,
		Producer:  s.producer,
		Logger:    a.log.With("task", id.String()),
	})
	var res changelog.RestoreResult
	t, err := task.New(task.Params{
		Topology:       a.topo,
		SubTopology:    id.SubTopology,
		Partition:      id.Partition,
		Stores:         state,
		Output:         out,
		PartitionCount: a.layout.partitionCount,
		WallClock:      s.now().UnixMilli(),
		Resume:         resume.clocks,
		GlobalStores:   a.global.Load().taskStores(),
		// Restore between opening the stores and the processors' Init,
		// so Init reads restored state.
		Restore: func([]task.OpenStore) error {
			opts := s.restoreOptions(id, resume)
			progress, announced := opts.Progress, false
			// The first snapshot comes before the first read, and only
			// when there is something to restore.
			opts.Progress = func(p changelog.RestoreProgress) {
				if !announced && !p.Done {
					announced = true
					s.taskState(id, taskRestoring, "to_restore", p.Total)
				}
				progress(p)
			}
			var err error
			res, err = state.Restore(ctx, opts)
			return err
		},
	})
	if err != nil {
		_ = state.Close()
		if changelog.IsCorrupt(err) {
			return nil, res, fmt.Errorf("%w: task %s: restore: %v", errCorruptState, id, err)
		}
		return nil, res, fmt.Errorf("task %s: %w", id, err)
	}
	a.metrics.restoredRecords.Add(float64(res.Records))
	lt := &liveTask{app: a.topo.Application(), task: t, state: state, resume: resume}
	if pos, found, err := state.Position(); err != nil {
		_ = lt.close()
		return nil, res, fmt.Errorf("task %s: %w", id, err)
	} else if found {
		lt.floor = pos
	}
	return lt, res, nil
}

// The states a task is logged in (session.taskState). A task is assigned
// when the group gives this instance its partition, restoring while its
// stores catch up with their changelogs (only when there is something to
// restore), running once open, and it ends revoked (the group moved its
// partition), fenced (the session's producer was fenced: another
// instance took over its transactional id) or closed (shutdown, another
// session restart, or a failure; attribute reason).
const (
	taskAssigned  = "assigned"
	taskRestoring = "restoring"
	taskRunning   = "running"
	taskRevoked   = "revoked"
	taskFenced    = "fenced"
	taskClosed    = "closed"
)

// taskState logs one line per task state change, all with the message
// "task state" and the attributes task ("0_3"), subtopology, partition and
// state, followed by attrs: to_restore (changelog offsets to read) when
// restoring; restored (records), restore_duration and rebuilt (changelog
// partitions restored from their start) when running; reason when closed.
func (s *session) taskState(id topology.TaskID, state string, attrs ...any) {
	s.app.log.Info("task state", append([]any{"task", id.String(), "subtopology", id.SubTopology,
		"partition", id.Partition, "state", state}, attrs...)...)
}

// restoreOptions restore task id at least to the changelog positions its
// last commit recorded, fencing departed members whose open transactions
// hold the changelogs' last stable offsets below them.
func (s *session) restoreOptions(id topology.TaskID, resume resumePoint) changelog.RestoreOptions {
	a := s.app
	floors := changelog.ChangelogOffsets{}
	for name, off := range resume.logs {
		floors[changelog.TopicPartition{Topic: changelog.TopicName(a.topo.Application(), name), Partition: id.Partition}] = off
	}
	var listener changelog.RestoreListener
	if a.cfg.RestoreListener != nil {
		listener = taskRestoreListener{id: id, l: a.cfg.RestoreListener}
	}
	return changelog.RestoreOptions{
		Listener:   listener,
		ClientOpts: a.clientOpts(),
		MinOffsets: floors,
		Unblock:    s.fenceDeparted,
		Pace:       a.pace,
		Progress: func(p changelog.RestoreProgress) {
			a.metrics.restoreRemaining.WithLabelValues(id.String()).Set(float64(p.Remaining))
			a.ha.setRestoring(id, p.Remaining)
		},
	}
}
