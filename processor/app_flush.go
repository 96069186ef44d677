package processor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
)

// heldOutputs tracks, for the staleness origin of what the tasks' record
// caches (topology.WithRecordCache) forward at a flush, when the oldest
// record processed since the last flush arrived.
type heldOutputs struct {
	since    time.Time
	flushing bool
}

// observe notes the arrival of the record about to be processed.
func (h *heldOutputs) observe(s *session) {
	if h.since.IsZero() {
		h.since = s.arrival()
	}
}

// flushTasks forwards what the tasks' record caches hold, so the
// transaction about to commit carries every output its inputs produced.
// A rejected output asks for a redo as a record's would (the abort takes
// the caches with the tasks); a failure in user code downstream fails
// the session, as a punctuator's does.
// redone says the transaction was aborted for a redo instead: there is
// nothing left to commit.
func (s *session) flushTasks(ctx context.Context) (redone bool, err error) {
	s.held.flushing = true
	defer func() { s.held = heldOutputs{} }()
	for _, id := range s.sortedTaskIDs() {
		if err := s.flushTask(s.tasks[id]); err != nil {
			if errors.Is(err, errRedo) {
				return true, s.redo(ctx, err)
			}
			return false, err
		}
	}
	return false, nil
}

func (s *session) flushTask(lt *liveTask) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("processor: %w: task %s panicked forwarding held updates: %v\n%s", errFatal, lt.task.ID(), p, debug.Stack())
		}
	}()
	err = taskCallError(lt, lt.task.Flush())
	lt.task.TakeHeld() // a cache fed by another's flush forwards in the same call
	return err
}

// observeHeld tells the controller about the updates lt's record caches
// just held back: outputs pending as much as collected ones, though they
// reach Collect only at the flush (which then does not count them again).
func (s *session) observeHeld(lt *liveTask) {
	if n, tenant := lt.task.TakeHeld(); n > 0 {
		s.ctrl.ObserveOutput(s.now(), tenant, s.arrival(), n)
	}
}

// taskCallError classifies the error of a task call made outside a
// record (a punctuation, a flush): a rejected output's redo or failure as
// Collect returned it, corrupt state for a rebuild, anything else fatal.
func taskCallError(lt *liveTask, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errRedo), errors.Is(err, errFatal):
		return err // from Collect: a rejected output
	case changelog.IsCorrupt(err):
		return fmt.Errorf("%w: task %s: %v", errCorruptState, lt.task.ID(), err)
	}
	if rerr := registryOutage(err); rerr != nil {
		return rerr
	}
	return fmt.Errorf("processor: %w: %w", errFatal, err)
}
