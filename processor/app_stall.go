package processor

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// Stall reports: a stream thread that has work and processes nothing says
// so.
//
// A thread's loop can go on turning while some of its work never moves: a
// task restoring behind a lease a sibling thread never gives back, a
// running task's partition paused and never resumed, a transaction whose
// end the loop keeps waiting for. None of that is an error, and the other
// thread's progress hides it in the App's metrics. So each loop turn
// checks (cheaply: a time comparison, unless stalled) when the thread last
// processed a record; after stallAfter without one while it has work
// (records behind or queued on its partitions, tasks waiting to restore
// behind another's lease, running tasks' partitions paused) it logs at warn level what it has and what it
// waits on, and again every stallAfter while that lasts. A thread without
// work is not stalled: an idle turn counts as progress.

// stallAfter is how long a thread with work may go without processing a
// record before it logs that it made no progress. A restore of its own,
// however long, is not a stall: the restore reports its progress.
const stallAfter = 10 * time.Second

// stallWatch is the loop's record of its progress.
type stallWatch struct {
	progress time.Time // a record processed, or a turn without work
	warned   time.Time
}

// progressed records that the loop processed records at now.
func (w *stallWatch) progressed(now time.Time) { w.progress = now }

// watchStall is the loop's per-turn check (see the top of this file).
func (s *session) watchStall(now time.Time) {
	w := &s.stall
	if w.progress.IsZero() {
		w.progress = now
		return
	}
	if now.Sub(w.progress) < stallAfter || now.Sub(w.warned) < stallAfter {
		return
	}
	attrs := s.stallState(now)
	if attrs == nil {
		w.progress = now // nothing to do: idle, not stalled
		return
	}
	w.warned = now
	s.app.log.Warn("stream thread made no progress", append([]any{"thread", s.th.index, "for", now.Sub(w.progress).Round(time.Second)}, attrs...)...)
}

// stallState describes the thread's work and what it waits on, as log
// attributes; nil when it has no work.
func (s *session) stallState(now time.Time) []any {
	lag, queued := s.th.lag.Load(), s.fair.queued()
	var restoring []string
	blocked := 0 // restores waiting for another's lease: a long restore of its own is no stall
	for _, id := range sortedIDs(s.restoring) {
		what := id.String()
		switch h, since := s.app.leases.holder(id); {
		case h == "":
			what += " (opening)"
		case h == fmt.Sprintf("thread %d task", s.th.index):
			what += " (restoring)"
		default:
			blocked++
			what += fmt.Sprintf(" (waits for the lease %s has held for %s)", h, now.Sub(since).Round(time.Second))
		}
		restoring = append(restoring, what)
	}
	var paused []string
	if s.cl != nil {
		for topic, ps := range s.cl.PauseFetchPartitions(nil) {
			for _, p := range ps {
				tp := changelog.TopicPartition{Topic: topic, Partition: p}
				if _, running := s.byInput[tp]; !running {
					continue
				}
				why := s.fair.paused[tp]
				if why == "" {
					why = "no known reason"
				}
				paused = append(paused, fmt.Sprintf("%s (%s)", tp, why))
			}
		}
		slices.Sort(paused)
	}
	if lag == 0 && queued == 0 && blocked == 0 && len(paused) == 0 {
		return nil
	}
	var tasks []string
	for _, id := range s.sortedTaskIDs() {
		tasks = append(tasks, id.String())
	}
	var held []string
	for tp, p := range s.fair.parts {
		if p.hold.held() {
			held = append(held, tp.String())
		}
	}
	slices.Sort(held)
	waits := "records to process"
	switch {
	case s.pipe.flight != nil:
		waits = fmt.Sprintf("the end of the transaction in flight (%s, started %s ago; %d bytes staged)",
			s.pipe.flight.reason, now.Sub(s.pipe.flight.start).Round(time.Millisecond), s.pipe.stagedBytes)
	case len(restoring) > 0 && len(tasks) == 0:
		waits = "restores"
	case queued > 0 && !s.runnable():
		waits = "queued records it may not process (held, or of tasks not running)"
	case queued == 0 && len(paused) > 0:
		waits = "paused partitions"
	}
	attrs := []any{"tasks", tasks, "restoring", restoring, "lag", lag, "queued", queued, "paused", paused,
		"held", held, "waits_for", waits, "assignment_change_pending", s.assignmentChanged()}
	if s.committer != nil {
		attrs = append(attrs, "txn_phase", s.committer.Phase().String())
	}
	return attrs
}

// sortedIDs are m's task ids in sortedTaskIDs' order.
func sortedIDs[V any](m map[topology.TaskID]V) []topology.TaskID {
	ids := make([]topology.TaskID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b topology.TaskID) int {
		if a.SubTopology != b.SubTopology {
			return a.SubTopology - b.SubTopology
		}
		return int(a.Partition - b.Partition)
	})
	return ids
}
