package processor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Orphaned partitions: partitions of the group's assignment that no member
// owns, and that nothing would ever give to one.
//
// A cooperative move (KIP-429) takes two rebalances: the first revokes the
// partition from its owner and assigns it to no one, the owner rejoins
// once it let go, and the second gives it to its new owner. A process
// killed between the two (after the first SyncGroup, before its members'
// JoinGroup reached the coordinator) leaves the group Stable, its
// assignment with the hole in it. Its restart then rejoins with the same
// static instance ids (KIP-345): the coordinator hands each thread the
// assignment its predecessor had, without a rebalance (the group's
// protocol did not change), and a restarted leader is told to skip the
// assignment (KIP-814), which franz-go does for a custom balancer such as
// copartitionBalancer. Nobody rejoins, so nothing ever assigns the hole:
// those partitions are never consumed, the thread that should own them
// idles with nothing assigned, and nothing fails or logs. With stream
// threads the members of one process move partitions among themselves
// every time they start at different moments, so a kill lands in that
// window now and then.
//
// So thread 0 of each App checks the group every orphanCheckEvery: when
// the group is Stable and two checks in a row find the same partitions of
// the source topics in no member's assignment, with the same members, it
// logs them at warn level and forces a rebalance, changing its join
// metadata so that the coordinator cannot answer the rejoin with the
// stored assignment (a follower rejoining with unchanged metadata gets the
// current one back). The leader's balanced assignment gives every
// partition an owner.

// orphanCheckEvery is how often thread 0 checks the group for orphaned
// partitions; two checks in a row must agree before it acts.
const orphanCheckEvery = 5 * time.Second

// assignmentsOf is each member's assignment in g: member id -> topic ->
// partitions.
func assignmentsOf(g kadm.DescribedGroup) map[string]map[string][]int32 {
	out := map[string]map[string][]int32{}
	for _, m := range g.Members {
		topics := map[string][]int32{}
		if asg, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range asg.Topics {
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
		}
		out[m.MemberID] = topics
	}
	return out
}

// orphans lists the partitions ("topic/p") of parts (topic -> partition
// count) that no member is assigned (members: member id -> topic ->
// partitions), sorted; and the sorted member ids, which identify the
// assignment's generation well enough.
func orphans(members map[string]map[string][]int32, parts map[string]int32) (orphaned []string, ids string) {
	assigned := map[string]map[int32]bool{}
	for _, topics := range members {
		for topic, ps := range topics {
			if assigned[topic] == nil {
				assigned[topic] = map[int32]bool{}
			}
			for _, p := range ps {
				assigned[topic][p] = true
			}
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(parts)) {
		for p := range parts[topic] {
			if !assigned[topic][p] {
				orphaned = append(orphaned, fmt.Sprintf("%s/%d", topic, p))
			}
		}
	}
	return orphaned, strings.Join(slices.Sorted(maps.Keys(members)), ",")
}

// orphanWatch decides, check by check, when to force a rebalance.
type orphanWatch struct {
	last, lastMembers string // the previous check's orphans and members; "" none
}

// observe takes a check's result (stable: the group is Stable) and
// reports whether to force a rebalance: the same orphans, with the same
// members, in two Stable checks in a row. After it says so, two more are
// needed.
func (w *orphanWatch) observe(stable bool, orphaned []string, members string) bool {
	key := strings.Join(orphaned, " ")
	if !stable || key == "" {
		w.last, w.lastMembers = "", ""
		return false
	}
	if key == w.last && members == w.lastMembers {
		w.last, w.lastMembers = "", ""
		return true
	}
	w.last, w.lastMembers = key, members
	return false
}

// watchOrphans runs the check on its own goroutine until ctx ends; force
// bumps the join metadata's rejoin counter and forces the rebalance.
func (s *session) watchOrphans(ctx context.Context, force func()) {
	a := s.app
	parts := map[string]int32{}
	for _, topic := range a.topo.SourceTopics() {
		if n, ok := a.layout.partitions[topic]; ok {
			parts[topic] = n
		}
	}
	group := a.topo.Application()
	t := time.NewTicker(orphanCheckEvery)
	defer t.Stop()
	var w orphanWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dctx, cancel := context.WithTimeout(ctx, orphanCheckEvery)
		gs, err := a.adm.DescribeGroups(dctx, group)
		cancel()
		g, ok := gs[group]
		if err != nil || !ok || g.Err != nil {
			w.observe(false, nil, "") // two checks in a row: start over
			continue
		}
		orphaned, members := orphans(assignmentsOf(g), parts)
		if w.observe(g.State == "Stable", orphaned, members) {
			a.log.Warn("partitions assigned to no member of the group: forcing a rebalance",
				"thread", s.th.index, "partitions", orphaned, "members", len(g.Members), "checked_every", orphanCheckEvery)
			force()
		}
	}
}

// rejoinCounter is the counter copartitionBalancer puts in the join
// metadata (joinUserData.Rejoin): bumped before a forced rebalance so the
// rejoin's metadata differs from the stored one.
type rejoinCounter struct{ n atomic.Uint32 }
