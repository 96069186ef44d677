package processor

import (
	"context"
	"fmt"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// liveTask is a Task in the service: the task core plus its stores' overlay
// and changelog (changelog.Task). It is the transaction's Participant.
type liveTask struct {
	task    *Task
	state   *changelog.Task
	flushed changelog.Offsets // from the last Flush: what Apply records
	// committed are the clocks the last commit stored (or the task
	// resumed from): an abort rewinds the task to them.
	committed Clocks
}

func (lt *liveTask) Apply(context.Context) error {
	if err := lt.state.Apply(lt.flushed); err != nil {
		return fmt.Errorf("task %s: %w", lt.task.ID(), err)
	}
	lt.flushed = nil
	return nil
}

func (lt *liveTask) Discard() {
	lt.state.Discard()
	lt.flushed = nil
}

func (lt *liveTask) close() error {
	err := lt.task.Close()
	if cerr := lt.state.Close(); err == nil {
		err = cerr
	}
	return err
}

// openTask creates the task for (sub-topology, partition), opening its
// stores on the shared DB and restoring them from their changelogs.
func (s *session) openTask(ctx context.Context, id topology.TaskID, resume Clocks) (*liveTask, error) {
	a := s.app
	state := a.db.NewTask(changelog.TaskConfig{
		AppID:     a.topo.Application(),
		Partition: id.Partition,
		Producer:  s.producer,
		Logger:    a.log.With("task", id.String()),
	})
	t, err := NewTask(TaskConfig{
		Topology:       a.topo,
		SubTopology:    id.SubTopology,
		Partition:      id.Partition,
		Stores:         state,
		Output:         s,
		PartitionCount: a.layout.partitionCount,
		WallClock:      s.now().UnixMilli(),
		Resume:         resume,
	})
	if err != nil {
		_ = state.Close()
		return nil, err
	}
	res, err := state.Restore(ctx, restoreOptions(a, id))
	if err != nil {
		_ = t.Close()
		_ = state.Close()
		return nil, fmt.Errorf("task %s: restore: %w", id, err)
	}
	if res.Records > 0 || len(res.Rebuilt) > 0 {
		a.log.Info("restored task", "task", id.String(), "records", res.Records,
			"duration", res.Duration, "rebuilt", len(res.Rebuilt))
	}
	a.metrics.restoredRecords.Add(float64(res.Records))
	if res.Records > 0 {
		s.ckpt.ObserveRestore(res.Records, res.Duration)
		s.ctrl.ObserveRestoreTime(res.Duration)
	}
	return &liveTask{task: t, state: state, committed: resume}, nil
}

func restoreOptions(a *App, id topology.TaskID) changelog.RestoreOptions {
	return changelog.RestoreOptions{
		ClientOpts: a.clientOpts(),
		Progress: func(p changelog.RestoreProgress) {
			a.metrics.restoreRemaining.WithLabelValues(id.String()).Set(float64(p.Remaining))
		},
	}
}
