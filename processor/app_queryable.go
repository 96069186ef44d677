package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// Interactive queries read committed state only, off the record loop.
// Badger holds exactly the committed state (package changelog), so a
// query opens a Badger snapshot (changelog.Snapshot) and reads it in the
// caller's goroutine, concurrently with processing, commits and the
// restores the loop runs; it never sees an overlay. The loop tells the
// queries which tasks they may read through the registry below: a task is
// restoring from the moment it is assigned until its restore has finished,
// then queryable until it is revoked or its session ends. An abort changes
// nothing: Badger never saw the aborted writes.
//
// Each commit records every task's input position (the input offsets it
// commits) with its state (changelog.TaskState.ApplyAt), so every answer says
// which inputs it reflects, and a caller can ask for at least a position.

// queryRegistry is what the loop publishes to queries: the DB, the tasks
// they may read, and the layout's partition counts.
type queryRegistry struct {
	// mu guards the fields; queries hold it for reading while their
	// snapshot is open, so that withdraw, which takes it for writing,
	// returns only once no query reads the DB it withdraws (a rebuild
	// closes that DB next).
	mu     sync.RWMutex
	db     *changelog.DB
	tasks  map[topology.TaskID]bool // true: queryable; false: restoring
	counts []int32                  // per sub-topology: partition count
	// thread is the stream thread each task of tasks is assigned to:
	// each thread publishes and withdraws only its own (app_threads.go).
	thread map[topology.TaskID]int
	// live holds the threads whose session has published its assignment
	// and not withdrawn it since: a thread between sessions (a restart,
	// the app stopped) or before its first assignment owns partitions no
	// one can name, so a query over every local partition cannot answer
	// for it.
	live map[int]bool
}

// queryAssigned publishes the session's assignment: tasks not assigned any
// more stop answering here (the owner now answers), newly assigned ones
// answer 503 until queryPublish. The session calls it when the assignment
// changed, before it opens the new tasks.
func (s *session) queryAssigned(want map[topology.TaskID]bool) {
	r := &s.app.iq
	r.mu.Lock()
	defer r.mu.Unlock()
	r.db, r.counts = s.app.db, s.app.layout.tasks
	if r.tasks == nil {
		r.tasks, r.thread = map[topology.TaskID]bool{}, map[topology.TaskID]int{}
	}
	if r.live == nil {
		r.live = map[int]bool{}
	}
	r.live[s.th.index] = true
	for id := range r.tasks {
		if !want[id] && r.thread[id] == s.th.index {
			delete(r.tasks, id)
			delete(r.thread, id)
		}
	}
	for id := range want {
		// A task this session runs stays (or is again, after a revocation
		// given back before the loop closed it: queryRevoked) queryable;
		// a new one restores first.
		_, running := s.tasks[id]
		r.tasks[id] = running
		r.thread[id] = s.th.index
	}
}

// queryRevoked stops the queries of the tasks of lost partitions at once,
// from the group's revoke callback: the loop closes the tasks only when it
// comes round to it, after the batch it is processing, and meanwhile the
// new owner may restore them and commit. Until then this instance's state
// of them is behind the owner's, and answering from it would pass stale
// counts off as the owner's (a query gets ErrNotLocal or a 503 instead).
func (s *session) queryRevoked(lost map[string][]int32) {
	r := &s.app.iq
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, ps := range lost {
		sub, ok := s.app.topo.SubTopologyOf(topic)
		if !ok {
			continue
		}
		for _, p := range ps {
			id := topology.TaskID{SubTopology: sub, Partition: p}
			if th, ok := r.thread[id]; ok && th == s.th.index {
				delete(r.tasks, id)
				delete(r.thread, id)
			}
		}
	}
}

// queryPublish makes task id queryable once its restore has finished,
// first recording the input position the restored state reflects: the
// group's committed offsets of the task's inputs (the restore read the
// changelogs up to the commit that stored them). Without them the position
// is recorded as unknown rather than left to whatever Badger held: a
// rebuilt store must not claim the position of the state it replaced. The
// next commit records it anyway.
func (s *session) queryPublish(ctx context.Context, id topology.TaskID, lt *liveTask) {
	// The restore brought the state's own position with it (the
	// changelogs carry it); a changelog written before positions were
	// falls back to the group's committed offsets.
	if len(lt.floor) == 0 && len(lt.task.Stores()) > 0 {
		pos, err := s.committedPosition(ctx, id, lt)
		if err != nil {
			if !errors.Is(err, errNoCommit) { // nothing committed yet: nothing to know
				s.app.log.Warn("input position of a restored task unknown until its next commit", "task", id.String(), "err", err)
			}
			pos = nil
		}
		if err := lt.state.RecordPosition(pos); err != nil {
			// Only the position is missing: answers say so, and bounded
			// queries wait for the next commit.
			s.app.log.Warn("record the input position of a restored task", "task", id.String(), "err", err)
		}
	}
	r := &s.app.iq
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tasks[id]; ok && r.thread[id] == s.th.index {
		r.tasks[id] = true
	}
}

// queryWithdraw stops every query of the session's tasks and waits for
// those reading: the session calls it first thing when it closes, before
// the DB may be closed and replaced (a rebuild, which with stream threads
// waits for every thread's session to close). The other threads' tasks
// keep answering.
func (s *session) queryWithdraw() {
	r := &s.app.iq
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, s.th.index)
	for id, th := range r.thread {
		if th == s.th.index {
			delete(r.tasks, id)
			delete(r.thread, id)
		}
	}
	if len(r.tasks) == 0 {
		r.db, r.tasks, r.thread = nil, nil, nil
	}
}

// stagePositions hands every task the input position its state will
// reflect once the commit about to run applies it: per input partition,
// the offset the transaction commits (the consumer's uncommitted offset:
// every polled record has been processed), or the one committed before
// when it consumed nothing since. The session calls it right before the
// commit; Apply writes it with the overlay (liveTask.position).
func (s *session) stagePositions() {
	committed, uncommitted := s.cl.CommittedOffsets(), s.processedOffsets()
	for id, lt := range s.tasks {
		pos := changelog.InputPosition{}
		for _, topic := range lt.task.Topics() {
			if eo, ok := uncommitted[topic][id.Partition]; ok && eo.Offset >= 0 {
				pos.Set(topic, id.Partition, eo.Offset)
			} else if eo, ok := committed[topic][id.Partition]; ok && eo.Offset >= 0 {
				pos.Set(topic, id.Partition, eo.Offset)
			}
		}
		lt.position = pos
		lt.state.StagePosition(pos)
	}
}

// committedPosition is the group's committed offsets of task id's inputs,
// as the broker has them now; an error when one of them has none.
func (s *session) committedPosition(ctx context.Context, id topology.TaskID, lt *liveTask) (changelog.InputPosition, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	group := s.app.topo.Application()
	// The partitions are named: asked for all of a group's offsets, the
	// broker leaves out one whose transactional commit is still in flight
	// (see txn.CommittedOffsets).
	parts := txn.Partitions{}
	for _, topic := range lt.task.Topics() {
		parts[topic] = []int32{id.Partition}
	}
	got, err := txn.CommittedOffsets(ctx, s.cl, group, parts)
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets of group %s: %w", group, err)
	}
	pos := changelog.InputPosition{}
	for _, topic := range lt.task.Topics() {
		at, ok := got[topic][id.Partition]
		if !ok {
			return nil, fmt.Errorf("%s/%d: %w", topic, id.Partition, errNoCommit)
		}
		pos.Set(topic, id.Partition, at)
	}
	return pos, nil
}

var errNoCommit = errors.New("no committed offset")

// queryView is what a query may read of a sub-topology's tasks.
type queryView struct {
	db         *changelog.DB
	queryable  []int32 // partitions, sorted
	restoring  []int32 // partitions, sorted
	partitions int32   // the sub-topology's partition count
	live       int     // threads with a published assignment (queryRegistry.live)
	// thread is the stream thread each queryable partition is assigned
	// to (queryRegistry.thread).
	thread map[int32]int
}

// read takes the registry's read lock, released by done, which the caller
// must call once it no longer reads the view's DB (and not take the lock
// again before: a waiting withdraw would deadlock it).
func (r *queryRegistry) read(sub int) (v queryView, done func()) {
	r.mu.RLock()
	v.db, v.live = r.db, len(r.live)
	if sub < len(r.counts) {
		v.partitions = r.counts[sub]
	}
	for id, ok := range r.tasks {
		if id.SubTopology != sub {
			continue
		}
		if ok {
			v.queryable = append(v.queryable, id.Partition)
			if v.thread == nil {
				v.thread = map[int32]int{}
			}
			v.thread[id.Partition] = r.thread[id]
		} else {
			v.restoring = append(v.restoring, id.Partition)
		}
	}
	slices.Sort(v.queryable)
	slices.Sort(v.restoring)
	return v, r.mu.RUnlock
}

// partitions is the partition count of sub-topology sub, once a session
// has published its layout.
func (r *queryRegistry) partitions(sub int) (int32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if sub >= len(r.counts) {
		return 0, false
	}
	return r.counts[sub], true
}
