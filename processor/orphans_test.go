package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// holeBalancer speaks the App's group protocol and assigns partitions 0
// and 1 of every topic to the member whose instance id ends in "-t0" and
// nothing to anyone else: the assignment a cooperative move leaves between
// its two rebalances (partitions 2 and 3 revoked from t0, not yet given to
// t1).
type holeBalancer struct{}

func (holeBalancer) ProtocolName() string { return "tidemark-copartition" }
func (holeBalancer) IsCooperative() bool  { return true }
func (holeBalancer) JoinGroupMetadata(interests []string, _ map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	return meta.AppendTo(nil)
}
func (b holeBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}
func (b holeBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}
func (holeBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := cb.NewPlan()
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, _ *kmsg.ConsumerMemberMetadata) {
		if m.InstanceID != nil && strings.HasSuffix(*m.InstanceID, "-t0") {
			for topic := range topics {
				plan.AddPartition(m, topic, 0)
				plan.AddPartition(m, topic, 1)
			}
		}
	})
	return plan
}

// TestRestartedThreadsTakeOrphanedPartitions: a process whose stream
// threads were killed between the two rebalances of a cooperative move
// left the group Stable with partitions assigned to no member. Its
// restart rejoins with the same static instance ids and the coordinator
// hands each thread its predecessor's assignment without a rebalance: the
// orphaned partitions were never consumed (a stall without an error: the
// thread owning nothing idles). The App finds them and forces a rebalance
// (app_orphans.go), and every record is counted.
func TestRestartedThreadsTakeOrphanedPartitions(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "orphans")
	const instance = "orph"

	// The killed process's threads: static members, the hole in their
	// assignment. Closing a static member that owes no rejoin does not
	// leave the group: as after a SIGKILL, it stays a member until its
	// session times out (a minute here, for a slow App start), unless
	// replaced first.
	var members []*kgo.Client
	for _, id := range []string{instance + "-t0", instance + "-t1"} {
		members = append(members, kafkatest.Client(t, kgo.ConsumerGroup(appID), kgo.InstanceID(id), kgo.ConsumeTopics(in),
			kgo.Balancers(holeBalancer{}), kgo.SessionTimeout(time.Minute)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		for _, cl := range members {
			cl.PollFetches(ctx)
		}
		cancel()
		gs, err := kafkatest.Admin(t).DescribeGroups(context.Background(), appID)
		if err == nil {
			if g, ok := gs[appID]; ok && g.State == "Stable" && len(g.Members) == 2 {
				n := 0
				for _, m := range g.Members {
					if asg, ok := m.Assigned.AsConsumer(); ok {
						for _, tp := range asg.Topics {
							n += len(tp.Partitions)
						}
					}
				}
				if n == 2 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the group did not settle on the assignment with a hole")
		}
	}
	for _, cl := range members {
		cl.Close()
	}

	want := produceKeysN(t, in, 0, 400, 16, 4)
	topo := countTopology(t, appID, in, out)
	_, stop := runApp(t, topo, processor.WithInstanceID(instance), processor.WithThreads(2),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond}))
	defer stop()
	checkCountsByPartition(t, out, want, 4, "restart over a hole")
}
