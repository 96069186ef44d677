package processor

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOrphansAreThePartitionsNoMemberHas: the partitions of the source
// topics in no member's assignment, as the hole a cooperative move leaves
// between its two rebalances.
func TestOrphansAreThePartitionsNoMemberHas(t *testing.T) {
	t.Parallel()
	parts := map[string]int32{"in": 4, "other": 2}
	members := map[string]map[string][]int32{
		"m-t0": {"in": {0, 1}, "other": {0, 1}},
		"m-t1": {}, // its partitions revoked from t0, never assigned to it
	}
	got, ids := orphans(members, parts)
	if fmt.Sprint(got) != "[in/2 in/3]" || ids != "m-t0,m-t1" {
		t.Fatalf("orphans %v of members %s; want [in/2 in/3] of m-t0,m-t1", got, ids)
	}
	members["m-t1"] = map[string][]int32{"in": {2, 3}}
	if got, _ := orphans(members, parts); len(got) != 0 {
		t.Fatalf("every partition owned, yet orphans %v", got)
	}
}

// TestOrphanWatchActsOnAHoleThatStays: a rebalance is forced only when
// two Stable checks in a row find the same orphans with the same members
// (the hole between a cooperative move's two rebalances lasts
// milliseconds); a group rebalancing, a hole that changed or members that
// changed start the count over, and after forcing two more checks are
// needed.
func TestOrphanWatchActsOnAHoleThatStays(t *testing.T) {
	t.Parallel()
	var w orphanWatch
	hole := []string{"in/2", "in/3"}
	steps := []struct {
		stable  bool
		orphans []string
		members string
		force   bool
	}{
		{true, hole, "a,b", false},
		{false, hole, "a,b", false}, // rebalancing
		{true, hole, "a,b", false},
		{true, []string{"in/2"}, "a,b", false}, // the hole changed
		{true, hole, "a,c", false},
		{true, hole, "a,b", false}, // other members
		{true, hole, "a,b", true},
		{true, hole, "a,b", false}, // forced: count again
		{true, hole, "a,b", true},
		{true, nil, "a,b", false},
		{true, hole, "a,b", false},
	}
	for i, st := range steps {
		if got := w.observe(st.stable, st.orphans, st.members); got != st.force {
			t.Fatalf("step %d (%+v): force %v, want %v", i, st, got, st.force)
		}
	}
}

// TestJoinMetadataCarriesTheRejoinCounter: a forced rejoin's metadata
// differs from the last one, so the coordinator rebalances instead of
// answering with the stored assignment.
func TestJoinMetadataCarriesTheRejoinCounter(t *testing.T) {
	t.Parallel()
	var rc rejoinCounter
	b := &copartitionBalancer{info: memberInfo{Instance: "i", Thread: 1}, rejoin: &rc}
	ud := func() joinUserData {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(b.JoinGroupMetadata([]string{"in"}, nil, 1)); err != nil {
			t.Fatal(err)
		}
		var u joinUserData
		if err := json.Unmarshal(meta.UserData, &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := ud(); u.Rejoin != 0 || u.Instance != "i" || u.Thread != 1 {
		t.Fatalf("user data %+v", u)
	}
	rc.n.Add(1)
	if u := ud(); u.Rejoin != 1 {
		t.Fatalf("after a forced rejoin: user data %+v, want rejoin 1", u)
	}
}
