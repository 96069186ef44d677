package processor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestPartitionRegainedBeforeTheLoopClosedItsTaskIsRestored: instance "a"
// owns both partitions and its record loop is stuck in a slow user
// function while "b" joins, takes a partition, counts more records of it
// and leaves again, so the group gives the partition back to a before a's
// loop came round to close the task. a must not go on counting from the
// state it had before b's commits (its own Badger state): every key's
// counts must go 1, 2, 3, … across both owners, as exactly-once promises.
func TestPartitionRegainedBeforeTheLoopClosedItsTaskIsRestored(t *testing.T) {
	t.Parallel()
	s := startBlockedOwner(t, "regain")
	s.block(t)

	b, stopB := runApp(t, s.topoB, processor.WithInstanceID("b"))
	moved, p := s.movedTo(t, b)
	s.produce(t, moved, p, 5, "on-b-")
	s.waitCount(t, b, moved)
	t.Logf("b counted %s (partition %d) to %d; b leaves", moved, p, s.want[moved])
	stopB()

	// The group gives partition p back to a, whose loop is still blocked.
	adm := kafkatest.Admin(t)
	deadline := time.Now().Add(45 * time.Second)
	for back := false; !back; {
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not assigned back to a after 45s", p)
		}
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		groups, err := adm.DescribeGroups(ctx, s.appID)
		cancel()
		if err != nil {
			continue
		}
		for _, m := range groups[s.appID].Members {
			asg, ok := m.Assigned.AsConsumer()
			if !ok || m.InstanceID == nil || *m.InstanceID != "a" {
				continue
			}
			for _, tp := range asg.Topics {
				if tp.Topic == s.in && slices.Contains(tp.Partitions, p) {
					back = true
				}
			}
		}
	}
	s.unblock()
	s.produce(t, moved, p, 3, "on-a-")
	checkCounts(t, s.out, s.want)
}
