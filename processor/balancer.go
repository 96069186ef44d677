package processor

import (
	"encoding/json"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberInfo travels in each member's join metadata, so every instance can
// tell which instance owns a partition and where to send a query for it.
type memberInfo struct {
	Instance string `json:"instance"`
	HTTP     string `json:"http,omitempty"`
}

// copartitionBalancer assigns partition p of every topic to one member, which
// is what co-partitioned joins and multi-input sub-topologies need: a task
// (sub-topology × partition) must see partition p of all its inputs.
// Assignment is sticky (a member keeps the partition numbers it owns as long
// as that stays balanced) and cooperative (KIP-429): a partition that moves is
// first revoked in one round and assigned in the next, so members keep
// processing what does not move.
type copartitionBalancer struct {
	info memberInfo
}

const copartitionProtocol = "tidemark-copartition"

func (*copartitionBalancer) ProtocolName() string { return copartitionProtocol }
func (*copartitionBalancer) IsCooperative() bool  { return true }

func (c *copartitionBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	topics := make([]string, 0, len(current))
	for t := range current {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = t
		owned.Partitions = current[t]
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	meta.UserData, _ = json.Marshal(c.info)
	return meta.AppendTo(nil)
}

func (*copartitionBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (c *copartitionBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(c, members)
	if err != nil {
		return nil, nil, err
	}
	return b, b.MemberTopics(), nil
}

func (c *copartitionBalancer) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	type member struct {
		m      *kmsg.JoinGroupResponseMember
		topics map[string]bool
		owned  map[int32]bool // partition numbers it owns now
		got    []int32
	}
	var members []*member
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := &member{m: m, topics: map[string]bool{}, owned: map[int32]bool{}}
		for _, t := range meta.Topics {
			mb.topics[t] = true
		}
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				mb.owned[p] = true
			}
		}
		members = append(members, mb)
	})
	// The JoinGroup response lists members in no particular order; sort
	// them so that ties (two members claiming a partition, equal loads)
	// resolve the same way whichever member leads and however the broker
	// ordered them. Static members sort by their stable instance id.
	sort.SliceStable(members, func(i, j int) bool { return memberSortKey(members[i].m) < memberSortKey(members[j].m) })
	var maxParts int32
	for _, n := range topics {
		maxParts = max(maxParts, n)
	}
	plan := b.NewPlan()
	if len(members) == 0 {
		return plan
	}
	// Balanced within one: every member gets base partition numbers and
	// `extra` of them one more. A ceiling quota for everyone is not enough:
	// with 4 partitions over 3 members two owners of 2 would keep theirs
	// and leave the third member nothing.
	base, extra := int(maxParts)/len(members), int(maxParts)%len(members)
	assigned := make([]*member, maxParts)
	// Sticky passes: a member keeps the partition numbers it owns, up to
	// base, and then up to `extra` members keep one more.
	for p := range maxParts {
		for _, mb := range members {
			if mb.owned[p] && len(mb.got) < base {
				mb.got = append(mb.got, p)
				assigned[p] = mb
				break
			}
		}
	}
	for p := range maxParts {
		if assigned[p] != nil || extra == 0 {
			continue
		}
		for _, mb := range members {
			if mb.owned[p] && len(mb.got) == base {
				mb.got = append(mb.got, p)
				assigned[p] = mb
				extra--
				break
			}
		}
	}
	// Fill pass: unowned numbers go to the least loaded member. The
	// sticky passes left every load at most base+1 with at most the
	// original extra members there, so this ends with loads base or base+1.
	for p := range maxParts {
		if assigned[p] != nil {
			continue
		}
		best := members[0]
		for _, mb := range members[1:] {
			if len(mb.got) < len(best.got) {
				best = mb
			}
		}
		best.got = append(best.got, p)
		assigned[p] = best
	}
	for topic, n := range topics {
		for p := range n {
			if mb := assigned[p]; mb.topics[topic] {
				plan.AddPartition(mb.m, topic, p)
			}
		}
	}
	plan.AdjustCooperative(b)
	return plan
}

func memberSortKey(m *kmsg.JoinGroupResponseMember) string {
	if m.InstanceID != nil && *m.InstanceID != "" {
		return "i:" + *m.InstanceID
	}
	return "m:" + m.MemberID
}

// decodeMemberInfoUserData reads the instance info a member put in the
// user data of its join metadata.
func decodeMemberInfoUserData(userData []byte) (memberInfo, bool) {
	var info memberInfo
	if json.Unmarshal(userData, &info) != nil || info.Instance == "" {
		return memberInfo{}, false
	}
	return info, true
}
