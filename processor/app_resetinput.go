package processor

import (
	"github.com/tidemark-streams/tidemark/topology"
)

// uncommittedInputs handles a task's input partitions that have no
// committed offset in the group. The consumer reads them from the log
// start (auto.offset.reset earliest, Kafka Streams' default), which on a
// first run is the expected start and is logged at info level.
//
// When the task's state nevertheless carries a position for the
// partition, the group's offsets were removed since that state was
// committed: the broker deletes a topic's committed offsets with the
// topic, so the input was deleted and recreated while the app was stopped
// (or the group's offsets expired, offsets.retention.minutes after it
// emptied). The position counts offsets of a log that is gone: kept as the
// floor (app_reflected.go), it would silently skip the new log's first
// records. The floor is dropped and a warning says so: the new log is
// processed from its start, on top of the state as it is (Kafka Streams
// does the same: it keeps the state and resets the offsets).
func (s *session) uncommittedInputs(lt *liveTask, id topology.TaskID, topics []string) {
	for _, topic := range topics {
		floor, ok := lt.floor.Offset(topic, id.Partition)
		if !ok {
			s.app.log.Info("input partition has no committed offset: it is read from its log start (auto.offset.reset earliest)",
				"task", id.String(), "topic", topic, "partition", id.Partition)
			continue
		}
		s.app.log.Warn("input partition has no committed offset, yet the task's state reflects its records up to an offset: "+
			"the topic was deleted and recreated (or the group's offsets expired) while the app was stopped; "+
			"it is read from its log start (auto.offset.reset earliest) on top of the state as it is",
			"task", id.String(), "topic", topic, "partition", id.Partition, "state_position", floor)
		delete(lt.floor[topic], id.Partition)
		if len(lt.floor[topic]) == 0 {
			delete(lt.floor, topic)
		}
	}
	if len(lt.floor) == 0 {
		lt.floor = nil
	}
}
