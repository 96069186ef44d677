package processor

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The group's committed offsets say where a task's inputs resume; the
// task's state says, through the position its changelogs carry
// (changelog.TaskState.Position), which inputs it already reflects. They
// agree unless a broker serves stale committed offsets: Kafka 4.1's group
// coordinator, reloading after an unclean restart, was seen answering
// offsets dozens of commits old. Processing from there would count inputs
// a second time on top of state that already holds them. A record below
// the state's position was processed and committed, with its outputs,
// before: it is skipped, and the next commit moves the group's offsets
// past it.
//
// Only under ExactlyOnce: there the position commits in one transaction
// with the outputs and the offsets, so a position proves the outputs were
// written. At-least-once produces the changelog, its position records and
// the outputs without a transaction, and a commit that aborts (an output
// the broker refused) or a SIGKILL between the acks leaves the changelog,
// position included, ahead of outputs that were never written. Skipping
// to that position lost those inputs' outputs for good (the session
// restart after an aborted at-least-once commit restores the changelog
// and skipped them at once), so at-least-once processes every input from
// the committed offsets again, on top of state that may already reflect
// it: repeated work, never lost work.

// reflected reports whether r is below lt's floor, counting and logging
// the skip; it forgets the floor of a partition once r passes it.
func (s *session) reflected(lt *liveTask, r *kgo.Record) bool {
	if s.app.cfg.Guarantee != ExactlyOnce {
		lt.floor = nil
		return false
	}
	floor, ok := lt.floor.Offset(r.Topic, r.Partition)
	if !ok {
		return false
	}
	if r.Offset >= floor {
		delete(lt.floor[r.Topic], r.Partition)
		if len(lt.floor[r.Topic]) == 0 {
			delete(lt.floor, r.Topic)
		}
		if len(lt.floor) == 0 {
			lt.floor = nil
		}
		return false
	}
	s.app.metrics.reflectedSkipped.Inc()
	if now := time.Now(); now.Sub(s.th.lastReflectedLog) >= 10*time.Second {
		s.th.lastReflectedLog = now
		s.app.log.Warn("skipping input the local state already reflects: the group's committed offsets are behind the state's own position (a broker serving stale offsets?)",
			"task", lt.task.ID().String(), "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "state_position", floor)
	}
	return true
}
