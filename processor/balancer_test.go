package processor

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupMember is a member as the group leader sees it in a JoinGroup
// response: its static instance id and the partition numbers it owns now
// (of every topic it subscribes to).
type groupMember struct {
	id    string
	owned []int32
}

// joinMembers builds the JoinGroup response members with the metadata the
// balancer itself writes, owning partitions owned of every topic.
func joinMembers(topics map[string]int32, ms []groupMember) []kmsg.JoinGroupResponseMember {
	names := slices.Sorted(maps.Keys(topics))
	var out []kmsg.JoinGroupResponseMember
	for _, m := range ms {
		current := map[string][]int32{}
		for _, topic := range names {
			for _, p := range m.owned {
				if p < topics[topic] {
					current[topic] = append(current[topic], p)
				}
			}
		}
		b := &copartitionBalancer{info: memberInfo{Instance: m.id, HTTP: m.id + ":8080"}}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = "member-" + m.id
		jm.InstanceID = kmsg.StringPtr(m.id)
		jm.ProtocolMetadata = b.JoinGroupMetadata(names, current, 1)
		out = append(out, jm)
	}
	return out
}

// balanceOnce runs one rebalance round as the leader: member id -> topic ->
// partitions.
func balanceOnce(t *testing.T, topics map[string]int32, ms []groupMember) map[string]map[string][]int32 {
	t.Helper()
	b := &copartitionBalancer{}
	mb, interests, err := b.MemberBalancer(joinMembers(topics, ms))
	if err != nil {
		t.Fatal(err)
	}
	for topic := range topics {
		if _, ok := interests[topic]; !ok {
			t.Fatalf("member topics %v miss %s", interests, topic)
		}
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	plan := into.(*kgo.BalancePlan).AsMemberIDMap()
	for id, ts := range plan {
		for topic := range ts {
			slices.Sort(ts[topic])
		}
		plan[id] = ts
	}
	return plan
}

// numbers is the set of partition numbers a member got in a plan, checking
// that it got partition p of every topic that has one (co-partitioning).
func numbers(t *testing.T, topics map[string]int32, got map[string][]int32) []int32 {
	t.Helper()
	set := map[int32]bool{}
	for _, ps := range got {
		for _, p := range ps {
			set[p] = true
		}
	}
	for p := range set {
		for topic, n := range topics {
			if p < n && !slices.Contains(got[topic], p) {
				t.Fatalf("member has partition %d of some topic but not of %s: %v", p, topic, got)
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func TestCopartitionBalancerRules(t *testing.T) {
	t.Parallel()
	two := map[string]int32{"orders": 4, "payments": 4}
	for _, tc := range []struct {
		name    string
		topics  map[string]int32
		members []groupMember
		// moved is how many partition numbers must change owner (and so
		// wait one round); -1: the members are new, nothing is owned.
		moved int
	}{
		{"a single member gets every partition of every topic", two,
			[]groupMember{{id: "a"}}, -1},
		{"a new group spreads partition numbers within one", map[string]int32{"x": 7, "y": 7},
			[]groupMember{{id: "a"}, {id: "b"}, {id: "c"}}, -1},
		{"stable membership keeps every assignment", two,
			[]groupMember{{id: "a", owned: []int32{0, 3}}, {id: "b", owned: []int32{1, 2}}}, 0},
		{"a joining member takes only the surplus, after it is revoked", two,
			[]groupMember{{id: "a", owned: []int32{0, 1, 2, 3}}, {id: "b"}}, 2},
		{"a third member joining two balanced owners still gets a share", two,
			[]groupMember{{id: "a", owned: []int32{0, 1}}, {id: "b", owned: []int32{2, 3}}, {id: "c"}}, 1},
		{"a leaving member's partitions go to the survivors at once", map[string]int32{"x": 6},
			[]groupMember{{id: "a", owned: []int32{0, 1}}, {id: "b", owned: []int32{2, 3}}}, 0},
		{"topics with fewer partitions follow the partition numbers", map[string]int32{"x": 6, "y": 3},
			[]groupMember{{id: "a", owned: []int32{0, 1, 2}}, {id: "b"}, {id: "c", owned: []int32{3, 4, 5}}}, 2},
		{"a partition claimed twice stays with one claimant", two,
			[]groupMember{{id: "a", owned: []int32{0, 1}}, {id: "b", owned: []int32{1, 2, 3}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var maxParts int32
			for _, n := range tc.topics {
				maxParts = max(maxParts, n)
			}
			owner := map[int32]string{}
			for _, m := range tc.members {
				for _, p := range m.owned {
					if _, ok := owner[p]; !ok {
						owner[p] = m.id
					}
				}
			}

			// Round 1: what a member owns is either kept or revoked;
			// nothing someone else owns is handed out (cooperative).
			first := balanceOnce(t, tc.topics, tc.members)
			next := make([]groupMember, len(tc.members))
			moved := 0
			for i, m := range tc.members {
				got := numbers(t, tc.topics, first["member-"+m.id])
				for _, p := range got {
					// Sticky and cooperative: a member keeps a subset
					// of what it owns, plus partitions nobody owns.
					if o, ok := owner[p]; ok && !slices.Contains(m.owned, p) {
						t.Fatalf("round 1 gives %s partition %d, which %s still owns: %v", m.id, p, o, first)
					}
				}
				for _, p := range m.owned {
					if !slices.Contains(got, p) && owner[p] == m.id {
						moved++
					}
				}
				next[i] = groupMember{id: m.id, owned: got}
			}
			if tc.moved >= 0 && moved != tc.moved {
				t.Fatalf("%d partition numbers revoked, want %d: %v", moved, tc.moved, first)
			}

			// Round 2 (the members rejoin with what they kept): every
			// partition number has exactly one owner, loads within one.
			second := balanceOnce(t, tc.topics, next)
			seen := map[int32]string{}
			minLoad, maxLoad := int(maxParts), 0
			for _, m := range next {
				got := numbers(t, tc.topics, second["member-"+m.id])
				for _, p := range m.owned {
					if !slices.Contains(got, p) {
						t.Fatalf("round 2 takes %d from %s although the balance was reached: %v", p, m.id, second)
					}
				}
				for _, p := range got {
					if o, dup := seen[p]; dup {
						t.Fatalf("partition %d goes to %s and %s", p, o, m.id)
					}
					seen[p] = m.id
				}
				minLoad, maxLoad = min(minLoad, len(got)), max(maxLoad, len(got))
			}
			if len(seen) != int(maxParts) {
				t.Fatalf("%d of %d partition numbers assigned: %v", len(seen), maxParts, second)
			}
			if maxLoad-minLoad > 1 {
				t.Fatalf("loads from %d to %d, want within 1: %v", minLoad, maxLoad, second)
			}

			// A third round changes nothing: the assignment is stable.
			third := balanceOnce(t, tc.topics, func() []groupMember {
				var ms []groupMember
				for _, m := range next {
					ms = append(ms, groupMember{id: m.id, owned: numbers(t, tc.topics, second["member-"+m.id])})
				}
				return ms
			}())
			if fmt.Sprint(third) != fmt.Sprint(second) {
				t.Fatalf("a settled group changes its assignment:\n%v\n%v", second, third)
			}

			// Deterministic: the broker's member order does not matter.
			reversed := slices.Clone(tc.members)
			slices.Reverse(reversed)
			if again := balanceOnce(t, tc.topics, reversed); fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("member order changes the plan:\n%v\n%v", first, again)
			}
		})
	}
}

func TestCopartitionBalancerCarriesInstanceInfo(t *testing.T) {
	t.Parallel()
	b := &copartitionBalancer{info: memberInfo{Instance: "i-1", HTTP: "10.0.0.1:8080"}}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b.JoinGroupMetadata([]string{"t"}, nil, 3)); err != nil {
		t.Fatal(err)
	}
	info, ok := decodeMemberInfoUserData(meta.UserData)
	if !ok || info != b.info {
		t.Fatalf("user data %q decodes to %+v, %v; want %+v", meta.UserData, info, ok, b.info)
	}
	if !b.IsCooperative() {
		t.Fatal("the balancer must be cooperative: moving partitions are revoked before they are assigned")
	}
}
