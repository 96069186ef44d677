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

// reflected reports whether r is below lt's floor, counting and logging
// the skip; it forgets the floor of a partition once r passes it.
func (s *session) reflected(lt *liveTask, r *kgo.Record) bool {
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
