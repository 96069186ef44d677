package processor

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberInfo travels in each member's join metadata, so every instance can
// tell which instance owns a partition and where to send a query for it.
//
// Instance is the process's instance id (the App's, shared by its stream
// threads, which query routing and the HA assignment go by); Thread is
// the member's thread in it (app_threads.go).
type memberInfo struct {
	Instance string `json:"instance"`
	HTTP     string `json:"http,omitempty"`
	Thread   int    `json:"thread,omitempty"`
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
	// ha configures standbys and warm-ups (standby_assign.go); lags
	// reports this member's local state for the join metadata and
	// onStandby receives the standby assignment it is synced with. Nil
	// lags and onStandby: no local state reported, none received.
	ha        haConfig
	lags      func() map[int32]int64
	onStandby func(standbyAssignment)
	// onSync, when set, receives the member's active assignment of each
	// sync (client goroutine).
	onSync func(map[string][]int32)
	// ends, when set, lists the changelog end offsets (haConfig.ends)
	// when this member leads an assignment; nil on failure.
	ends func() map[int32]int64
	// rejoin, when set, is the member's forced-rebalance counter
	// (joinUserData.Rejoin).
	rejoin *rejoinCounter
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
	ud := joinUserData{memberInfo: c.info}
	if c.lags != nil {
		ud.Lags = c.lags()
	}
	if c.rejoin != nil {
		ud.Rejoin = c.rejoin.n.Load()
	}
	meta.UserData, _ = json.Marshal(ud)
	return meta.AppendTo(nil)
}

func (c *copartitionBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	parts, err := kgo.ParseConsumerSyncAssignment(assignment)
	if err == nil && c.onStandby != nil {
		c.onStandby(parseStandbyAssignment(assignment))
	}
	if err == nil && c.onSync != nil {
		c.onSync(parts)
	}
	return parts, err
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
		ha     haMember
	}
	var members []*member
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := &member{m: m, topics: map[string]bool{}, ha: haMember{owned: map[int32]bool{}}}
		for _, t := range meta.Topics {
			mb.topics[t] = true
		}
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				mb.ha.owned[p] = true
			}
		}
		var ud joinUserData
		if json.Unmarshal(meta.UserData, &ud) == nil {
			mb.ha.lags = ud.Lags
			mb.ha.process, mb.ha.thread = ud.Instance, ud.Thread
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
	has := make([]haMember, len(members))
	for i, mb := range members {
		has[i] = mb.ha
	}
	cfg := c.ha
	if c.ends != nil && cfg.stateful != nil {
		cfg.ends = c.ends()
	}
	hp := assignHA(has, maxParts, cfg)
	for topic, n := range topics {
		for p := range n {
			if mb := members[hp.active[p]]; mb.topics[topic] {
				plan.AddPartition(mb.m, topic, p)
			}
		}
	}
	plan.AdjustCooperative(b)
	if c.ha.standbys == 0 && !slices.ContainsFunc(hp.warmup, func(w []int32) bool { return len(w) > 0 }) && !slices.ContainsFunc(hp.standby, func(w []int32) bool { return len(w) > 0 }) {
		return plan // nothing to add: the plain consumer assignment
	}
	into := haSyncAssignment{plan: plan, userData: map[string][]byte{}}
	for i, mb := range members {
		sa := standbyAssignment{Standby: hp.standby[i], WarmUp: hp.warmup[i]}
		if len(sa.Standby)+len(sa.WarmUp) > 0 {
			into.userData[mb.m.MemberID], _ = json.Marshal(sa)
		}
	}
	return into
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
