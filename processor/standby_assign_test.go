package processor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// haCase is one assignment: members (in sort order) with what they own
// and the lags they report, and the expected actives, standbys, warm-ups.
type haCase struct {
	name      string
	parts     int32
	standbys  int
	stateless bool // no partition has stateful tasks
	// maxWarmups is haConfig.maxWarmups; 0: no cap (as large as parts).
	maxWarmups int
	ends       map[int32]int64 // haConfig.ends
	owned      [][]int32
	lags       []map[int32]int64
	// want: per member the actives (intended owner), standbys, warm-ups.
	active, standby, warmup [][]int32
}

func (c haCase) run() haPlan {
	ms := make([]haMember, len(c.owned))
	for i := range c.owned {
		ms[i] = haMember{owned: map[int32]bool{}, lags: c.lags[i]}
		for _, p := range c.owned[i] {
			ms[i].owned[p] = true
		}
	}
	cfg := haConfig{standbys: c.standbys, acceptable: 10_000, maxWarmups: c.maxWarmups, ends: c.ends, stateful: func(int32) bool { return !c.stateless }}
	if cfg.maxWarmups == 0 {
		cfg.maxWarmups = int(c.parts)
	}
	return assignHA(ms, c.parts, cfg)
}

// lag is member m's lag on p as the leader sees it: reported, or with no
// state the changelogs' end offsets when known.
func (c haCase) lag(m int, p int32) (int64, bool) {
	if l, ok := c.lags[m][p]; ok {
		return l, true
	}
	l, ok := c.ends[p]
	return l, ok
}

func activesOf(plan haPlan, members int) [][]int32 {
	out := make([][]int32, members)
	for p, m := range plan.active {
		out[m] = append(out[m], int32(p))
	}
	return out
}

func TestAssignHATable(t *testing.T) {
	t.Parallel()
	none := map[int32]int64(nil)
	cases := []haCase{
		{
			name: "fresh group, no state anywhere: balanced, no warm-ups", parts: 4,
			owned: [][]int32{nil, nil}, lags: []map[int32]int64{none, none},
			active: [][]int32{{0, 2}, {1, 3}}, standby: [][]int32{nil, nil}, warmup: [][]int32{nil, nil},
		},
		{
			name: "one standby each: on the other instance", parts: 4, standbys: 1,
			owned: [][]int32{{0, 1}, {2, 3}}, lags: []map[int32]int64{{0: 0, 1: 0}, {2: 0, 3: 0}},
			active: [][]int32{{0, 1}, {2, 3}}, standby: [][]int32{{2, 3}, {0, 1}}, warmup: [][]int32{nil, nil},
		},
		{
			name: "two standbys wanted, one other instance: one standby", parts: 2, standbys: 2,
			owned: [][]int32{{0}, {1}}, lags: []map[int32]int64{{0: 0}, {1: 0}},
			active: [][]int32{{0}, {1}}, standby: [][]int32{{1}, {0}}, warmup: [][]int32{nil, nil},
		},
		{
			name: "a new instance without state warms up; the caught-up owner keeps its tasks", parts: 4,
			owned: [][]int32{{0, 1, 2, 3}, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0}, none},
			active: [][]int32{{0, 1, 2, 3}, nil}, standby: [][]int32{nil, nil}, warmup: [][]int32{nil, {2, 3}},
		},
		{
			name: "the warm-up caught up: its partitions move (tailed meanwhile as standbys)", parts: 4,
			owned: [][]int32{{0, 1, 2, 3}, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0}, {2: 5, 3: 9_000}},
			active: [][]int32{{0, 1}, {2, 3}}, standby: [][]int32{nil, {2, 3}}, warmup: [][]int32{nil, nil},
		},
		{
			name: "the warm-up is caught up on one partition only", parts: 4,
			owned: [][]int32{{0, 1, 2, 3}, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0}, {2: 20_000, 3: 10_000}},
			active: [][]int32{{0, 1, 2}, {3}}, standby: [][]int32{nil, {3}}, warmup: [][]int32{nil, {2}},
		},
		{
			name: "failover: the dead owner's partitions go to its caught-up standby, the balanced target warms up", parts: 4, standbys: 1,
			// A (owned 0,1) died; B owns 2,3 and kept 0,1 as standbys; C is new.
			owned: [][]int32{{2, 3}, nil}, lags: []map[int32]int64{{0: 3, 1: 0, 2: 0, 3: 0}, none},
			active: [][]int32{{0, 1, 2, 3}, nil}, standby: [][]int32{nil, {2, 3}}, warmup: [][]int32{nil, {0, 1}},
		},
		{
			name: "the previous owner is preferred over another caught-up standby", parts: 3,
			// A owns everything, B has standbys with lag 0, C is new. The
			// target of 1 is B (caught up: it moves, B tails it until it
			// arrives); the target of 2 is C (not caught up): A keeps it
			// rather than hand it to B, though B's lag is lower (A is still
			// restoring 2's tail).
			owned: [][]int32{{0, 1, 2}, nil, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 50}, {0: 0, 1: 0, 2: 0}, none},
			active: [][]int32{{0, 2}, {1}, nil}, standby: [][]int32{nil, {1}, nil}, warmup: [][]int32{nil, nil, {2}},
		},
		{
			name: "no caught-up member: the most caught-up one gets it, the balanced target warms up", parts: 2,
			owned: [][]int32{nil, nil}, lags: []map[int32]int64{{0: 50_000, 1: 50_000}, none},
			active: [][]int32{{0, 1}, nil}, standby: [][]int32{nil, nil}, warmup: [][]int32{nil, {1}},
		},
		{
			name: "failover, the only standby lags more than acceptable: it takes over rather than a member without state", parts: 4, standbys: 1,
			// A (owned 0,1) died; B owns 2,3 and kept 0,1 as standbys,
			// which fell 25k behind in a burst; C is new.
			owned: [][]int32{{2, 3}, nil}, lags: []map[int32]int64{{0: 25_000, 1: 25_000, 2: 0, 3: 0}, none},
			active: [][]int32{{0, 1, 2, 3}, nil}, standby: [][]int32{nil, {2, 3}}, warmup: [][]int32{nil, {0, 1}},
		},
		{
			name: "no caught-up member: the target keeps it when it is the most caught up", parts: 2,
			owned: [][]int32{nil, nil}, lags: []map[int32]int64{{0: 30_000, 1: 60_000}, {0: 40_000, 1: 50_000}},
			active: [][]int32{{0}, {1}}, standby: [][]int32{nil, nil}, warmup: [][]int32{nil, nil},
		},
		{
			name: "the most caught-up non-owner gets it when the target and owner are not caught up", parts: 2,
			owned: [][]int32{nil, nil, nil}, lags: []map[int32]int64{none, none, {0: 100, 1: 100}},
			active: [][]int32{nil, nil, {0, 1}}, standby: [][]int32{nil, nil, nil}, warmup: [][]int32{{0}, {1}, nil},
		},
		{
			name: "at most maxWarmups warm-ups at once (max.warmup.replicas)", parts: 8, maxWarmups: 2,
			owned: [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, nil, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0}, none, none},
			active: [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, nil, nil}, standby: [][]int32{nil, nil, nil}, warmup: [][]int32{nil, {3}, {4}},
		},
		{
			name: "a new instance without state takes small tasks at once: their whole changelogs are within the acceptable lag", parts: 4,
			owned: [][]int32{{0, 1, 2, 3}, nil}, lags: []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0}, none},
			// 2 and 3 are the new instance's share: 2 moves (tailed until
			// it arrives), 3 warms up.
			ends:   map[int32]int64{0: 9_000, 1: 9_000, 2: 4_000, 3: 60_000},
			active: [][]int32{{0, 1, 3}, {2}}, standby: [][]int32{nil, {2}}, warmup: [][]int32{nil, {3}},
		},
		{
			name: "after a failover standbys rebalance: the balanced targets warm up, the caught-up copies stay meanwhile", parts: 6, standbys: 1,
			// C crashed and rejoined: it got its actives back, while A and
			// B still hold every standby. Balanced: A 3,5; B 0,4; C 1,2.
			owned:  [][]int32{{0, 1}, {2, 3}, {4, 5}},
			lags:   []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0, 4: 0}, {0: 0, 1: 0, 2: 0, 3: 0, 5: 0}, {4: 0, 5: 0}},
			active: [][]int32{{0, 1}, {2, 3}, {4, 5}}, standby: [][]int32{{2, 3, 4}, {0, 1, 5}, nil}, warmup: [][]int32{{5}, {4}, {1, 2}},
		},
		{
			name: "after a failover standbys rebalance: once the targets caught up, the extra copies go", parts: 6, standbys: 1,
			owned:  [][]int32{{0, 1}, {2, 3}, {4, 5}},
			lags:   []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}, {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}, {1: 0, 2: 0, 4: 0, 5: 0}},
			active: [][]int32{{0, 1}, {2, 3}, {4, 5}}, standby: [][]int32{{3, 5}, {0, 4}, {1, 2}}, warmup: [][]int32{nil, nil, nil},
		},
		{
			name: "after a failover standbys rebalance: warm-ups beyond the cap wait, their caught-up copies stay", parts: 6, standbys: 1, maxWarmups: 2,
			owned:  [][]int32{{0, 1}, {2, 3}, {4, 5}},
			lags:   []map[int32]int64{{0: 0, 1: 0, 2: 0, 3: 0, 4: 0}, {0: 0, 1: 0, 2: 0, 3: 0, 5: 0}, {4: 0, 5: 0}},
			active: [][]int32{{0, 1}, {2, 3}, {4, 5}}, standby: [][]int32{{2, 3, 4}, {0, 1, 5}, nil}, warmup: [][]int32{nil, nil, {1, 2}},
		},
		{
			name: "stateless partitions: balance only, no standbys, no warm-ups", parts: 4, standbys: 1, stateless: true,
			owned: [][]int32{{0, 1, 2, 3}, nil}, lags: []map[int32]int64{none, none},
			active: [][]int32{{0, 1}, {2, 3}}, standby: [][]int32{nil, nil}, warmup: [][]int32{nil, nil},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := c.run()
			checkHAInvariants(t, c, plan)
			got := activesOf(plan, len(c.owned))
			for m := range c.owned {
				if !slices.Equal(got[m], c.active[m]) || !slices.Equal(plan.standby[m], c.standby[m]) || !slices.Equal(plan.warmup[m], c.warmup[m]) {
					t.Fatalf("member %d: active %v standby %v warmup %v; want active %v standby %v warmup %v\nwhole plan: actives %v standbys %v warmups %v",
						m, got[m], plan.standby[m], plan.warmup[m], c.active[m], c.standby[m], c.warmup[m], got, plan.standby, plan.warmup)
				}
			}
		})
	}
}

// checkHAInvariants checks what every plan must satisfy: each partition
// active on exactly one member, standbys never on the active owner (but
// for a partition in flight to it) nor on its warm-up, nor twice on a
// member; as many standbys as asked for when there are instances for
// them; warm-ups only where a member keeps the partition that is caught
// up or fresher than the warm-up's, and no more than the cap.
func checkHAInvariants(t *testing.T, c haCase, plan haPlan) {
	t.Helper()
	n := len(c.owned)
	if int32(len(plan.active)) != c.parts {
		t.Fatalf("%d actives for %d partitions", len(plan.active), c.parts)
	}
	owns := func(m int, p int32) bool { return slices.Contains(c.owned[m], p) }
	totalWarm := 0
	for p := range c.parts {
		a := plan.active[p]
		if a < 0 || a >= n {
			t.Fatalf("partition %d active on member %d of %d", p, a, n)
		}
		var copies, warm, regular int
		for m := range n {
			inStandby := slices.Contains(plan.standby[m], p)
			inWarm := slices.Contains(plan.warmup[m], p)
			if inStandby && inWarm {
				t.Fatalf("partition %d both standby and warm-up on member %d", p, m)
			}
			if inWarm {
				warm++
				if m == a {
					t.Fatalf("partition %d warms up on its active owner %d", p, m)
				}
				la, ok := c.lag(a, p)
				if !ok {
					t.Fatalf("partition %d warms up on %d while kept by %d, which has no state", p, m, a)
				}
				if lw, ok := c.lag(m, p); la > 10_000 && ok && lw <= la {
					t.Fatalf("partition %d warms up on %d (lag %d) while kept by %d, not caught up and no fresher", p, m, lw, a)
				}
			}
			if inStandby {
				copies++
				if m == a && owns(m, p) {
					t.Fatalf("partition %d standby on its active owner %d", p, m)
				}
				if m != a {
					regular++
				}
			}
		}
		if warm > 1 {
			t.Fatalf("partition %d has %d warm-ups", p, warm)
		}
		totalWarm += warm
		if c.stateless && copies+warm > 0 {
			t.Fatalf("stateless partition %d has copies", p)
		}
		if !c.stateless {
			if want := min(c.standbys, n-1-warm); regular != want {
				t.Fatalf("partition %d has %d standbys on other members, want %d", p, regular, want)
			}
		}
	}
	if c.maxWarmups > 0 && totalWarm > c.maxWarmups {
		t.Fatalf("%d warm-ups, at most %d wanted", totalWarm, c.maxWarmups)
	}
	for m := range n {
		for _, l := range [][]int32{plan.standby[m], plan.warmup[m]} {
			if len(slices.Compact(slices.Clone(l))) != len(l) || !slices.IsSorted(l) {
				t.Fatalf("member %d: copies %v not sorted and distinct", m, l)
			}
		}
	}
}

// TestAssignHARandomised checks the invariants over random groups: members
// with random ownership (as a group mid-failover has it) and random lags.
func TestAssignHARandomised(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for range 2000 {
		n := 1 + rng.IntN(5)
		c := haCase{parts: int32(1 + rng.IntN(12)), standbys: rng.IntN(3), stateless: rng.IntN(8) == 0, maxWarmups: rng.IntN(4),
			owned: make([][]int32, n), lags: make([]map[int32]int64, n)}
		for p := range c.parts {
			if o := rng.IntN(n + 1); o < n { // owned by one member, or by none (its owner left)
				c.owned[o] = append(c.owned[o], p)
			}
		}
		if rng.IntN(2) == 0 {
			c.ends = map[int32]int64{}
			for p := range c.parts {
				c.ends[p] = int64(rng.IntN(40_000))
			}
		}
		for m := range n {
			c.lags[m] = map[int32]int64{}
			for p := range c.parts {
				switch rng.IntN(4) {
				case 0: // no state
				case 1:
					c.lags[m][p] = int64(rng.IntN(10))
				case 2:
					c.lags[m][p] = int64(rng.IntN(30_000))
				default:
					if slices.Contains(c.owned[m], p) {
						c.lags[m][p] = 0 // running
					}
				}
			}
		}
		plan := c.run()
		checkHAInvariants(t, c, plan)
		// Stickiness: a caught-up owner loses a partition only to a
		// caught-up member, and only to its balanced target.
		owned := make([]map[int32]bool, n)
		for m := range n {
			owned[m] = map[int32]bool{}
			for _, p := range c.owned[m] {
				owned[m][p] = true
			}
		}
		target := balanceSticky(owned, c.parts)
		for p := range c.parts {
			a := plan.active[p]
			for m := range n {
				if slices.Contains(c.owned[m], p) && m != a {
					if l, ok := c.lag(m, p); ok && l <= 10_000 && !c.stateless {
						if la, ok := c.lag(a, p); !ok || la > 10_000 {
							t.Fatalf("partition %d moved from caught-up owner %d to %d, not caught up (lags %v)", p, m, a, c.lags)
						}
						if a != target[p] {
							t.Fatalf("partition %d moved from caught-up owner %d to %d, which is not its target %d", p, m, a, target[p])
						}
					}
				}
			}
		}
	}
}

type haTestMember struct {
	id    string
	owned []int32
	lags  map[int32]int64
}

// balanceHA runs the group balancer as the leader of members ms (one
// standby, acceptable lag 10,000, up to 2 warm-ups, every partition
// stateful) and reads each member's standby assignment and partitions
// back from its sync assignment, as the member's ParseSyncAssignment does.
func balanceHA(t *testing.T, topics map[string]int32, ms []haTestMember) (jms []kmsg.JoinGroupResponseMember, got map[string]standbyAssignment, parts map[string]map[string][]int32) {
	t.Helper()
	names := slices.Sorted(maps.Keys(topics))
	for _, m := range ms {
		current := map[string][]int32{}
		for _, topic := range names {
			current[topic] = m.owned
		}
		b := &copartitionBalancer{info: memberInfo{Instance: m.id}, lags: func() map[int32]int64 { return m.lags }}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = "member-" + m.id
		jm.InstanceID = kmsg.StringPtr(m.id)
		jm.ProtocolMetadata = b.JoinGroupMetadata(names, current, 1)
		jms = append(jms, jm)
	}
	leader := &copartitionBalancer{ha: haConfig{standbys: 1, acceptable: 10_000, maxWarmups: 2, stateful: func(int32) bool { return true }}}
	mb, _, err := leader.MemberBalancer(jms)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]standbyAssignment{}
	parts = map[string]map[string][]int32{}
	for _, sa := range into.IntoSyncAssignment() {
		var received standbyAssignment
		member := &copartitionBalancer{onStandby: func(a standbyAssignment) { received = a }}
		ps, err := member.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		got[sa.MemberID], parts[sa.MemberID] = received, ps
	}
	return jms, got, parts
}

// TestHABalancerCarriesStandbys runs the group balancer as the leader
// and reads each member's standby assignment back from its sync
// assignment, as the member's ParseSyncAssignment does; co-partitioning
// of the active partitions holds.
func TestHABalancerCarriesStandbys(t *testing.T) {
	t.Parallel()
	topics := map[string]int32{"a": 4, "b": 4}
	names := slices.Sorted(maps.Keys(topics))
	jms, got, parts := balanceHA(t, topics, []haTestMember{
		{"i-a", []int32{0, 1, 2, 3}, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}},
		{"i-b", nil, map[int32]int64{3: 50_000}},
	})
	// i-a keeps everything (i-b is not caught up), i-b warms up 2 and 3;
	// the standby of 0 and 1 is i-b too (the only other instance).
	want := map[string]standbyAssignment{
		"member-i-a": {},
		"member-i-b": {Standby: []int32{0, 1}, WarmUp: []int32{2, 3}},
	}
	for id, w := range want {
		if fmt.Sprint(got[id]) != fmt.Sprint(w) {
			t.Fatalf("%s: standby assignment %+v, want %+v", id, got[id], w)
		}
	}
	for _, topic := range names {
		if !slices.Equal(parts["member-i-a"][topic], []int32{0, 1, 2, 3}) || len(parts["member-i-b"][topic]) != 0 {
			t.Fatalf("actives %v: want all of %s on i-a", parts, topic)
		}
	}
	// The instance info still decodes from the richer user data.
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(jms[0].ProtocolMetadata); err != nil {
		t.Fatal(err)
	}
	if info, ok := decodeMemberInfoUserData(meta.UserData); !ok || info.Instance != "i-a" {
		t.Fatalf("member info %+v, %v", info, ok)
	}
	var ud joinUserData
	if err := json.Unmarshal(meta.UserData, &ud); err != nil || len(ud.Lags) != 4 {
		t.Fatalf("lags in user data %s: %v", meta.UserData, err)
	}
}

func TestStandbyConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		opts []Option
		ok   bool
	}{
		{[]Option{WithStandbyReplicas(2)}, true},
		{[]Option{WithStandbyReplicas(-1)}, false},
		{[]Option{WithAcceptableRecoveryLag(-5)}, false},
		{[]Option{WithProbingRebalanceInterval(-time.Second)}, false},
		{[]Option{WithProbingRebalanceInterval(time.Second), WithAcceptableRecoveryLag(100)}, true},
		{[]Option{WithMaxWarmupReplicas(-1)}, false},
		{[]Option{WithMaxWarmupReplicas(5)}, true},
	} {
		cfg, err := newConfig(append([]Option{WithBrokers("x:9092")}, c.opts...))
		if err == nil {
			err = cfg.EnsureDefaults("app").Validate()
		}
		if (err == nil) != c.ok {
			t.Fatalf("%+v: err %v, want ok=%v", cfg, err, c.ok)
		}
	}
	var c Config
	c.EnsureDefaults("app")
	if c.AcceptableRecoveryLag != 10_000 || c.ProbingRebalanceInterval != 10*time.Minute || c.StandbyReplicas != 0 || c.MaxWarmupReplicas != 2 {
		t.Fatalf("defaults %d %s %d %d", c.AcceptableRecoveryLag, c.ProbingRebalanceInterval, c.StandbyReplicas, c.MaxWarmupReplicas)
	}
}

// TestAssignHAConverges plays rounds of the group against assignHA: each
// round the members report what they run and keep, a partition moving to
// another member is revoked in one round and assigned in the next
// (cooperative), a new copy takes two rounds to catch up, and a round
// follows whenever something moved or a warm-up exists (its prober).
// Members join and leave between runs; some share a process. Every run
// must settle within a bound, balanced, with no warm-up left (no endless
// probing), and warm-ups must stay within the cap on the way.
func TestAssignHAConverges(t *testing.T) {
	t.Parallel()
	type member struct {
		process string
		owned   map[int32]bool
		copies  map[int32]int64 // standbys and warm-ups: their lag
	}
	round := func(ms []*member, parts int32, cfg haConfig) (haPlan, bool) {
		hm := make([]haMember, len(ms))
		byProcess := map[string]map[int32]int64{} // a process's threads share their state
		key := func(i int) string {
			if ms[i].process == "" {
				return fmt.Sprint("#", i)
			}
			return ms[i].process
		}
		for i, m := range ms {
			lags := byProcess[key(i)]
			if lags == nil {
				lags = map[int32]int64{}
				byProcess[key(i)] = lags
			}
			for p := range m.owned {
				lags[p] = 0
			}
			for p, l := range m.copies {
				if old, ok := lags[p]; !ok || l < old {
					lags[p] = l
				}
			}
		}
		for i, m := range ms {
			hm[i] = haMember{owned: m.owned, lags: byProcess[key(i)], process: m.process, thread: i}
		}
		plan := assignHA(hm, parts, cfg)
		warm := 0
		for _, w := range plan.warmup {
			warm += len(w)
		}
		if warm > cfg.maxWarmups {
			t.Fatalf("%d warm-ups, cap %d: %+v", warm, cfg.maxWarmups, plan)
		}
		moved := warm > 0
		for p := range parts {
			a, prev := plan.active[p], -1
			for i, m := range ms {
				if m.owned[p] {
					prev = i
				}
			}
			switch {
			case prev == a:
			case prev >= 0:
				delete(ms[prev].owned, p) // revoked now, assigned next round
				moved = true
			default:
				ms[a].owned[p] = true
				moved = true
			}
		}
		for i, m := range ms {
			keep := map[int32]bool{}
			for _, p := range slices.Concat(plan.standby[i], plan.warmup[i]) {
				if !m.owned[p] {
					keep[p] = true
				}
			}
			for p, l := range m.copies {
				if !keep[p] {
					delete(m.copies, p)
				} else {
					m.copies[p] = max(0, l-30_000)
				}
			}
			for p := range keep {
				if _, ok := m.copies[p]; !ok {
					m.copies[p] = 50_000 // never more than the whole changelogs
					if e, ok := cfg.ends[p]; ok {
						m.copies[p] = min(e, 50_000)
					}
					moved = true
				}
			}
		}
		return plan, moved
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for it := range 1500 {
		parts := int32(1 + rng.IntN(12))
		cfg := haConfig{standbys: rng.IntN(3), acceptable: 10_000, maxWarmups: 1 + rng.IntN(3),
			stateful: func(p int32) bool { return p%4 != 3 }}
		if rng.IntN(2) == 0 {
			cfg.ends = map[int32]int64{}
			for p := range parts {
				cfg.ends[p] = int64(rng.IntN(60_000))
			}
		}
		var ms []*member
		join := func() {
			m := &member{owned: map[int32]bool{}, copies: map[int32]int64{}}
			if rng.IntN(3) == 0 {
				m.process = fmt.Sprint("p", rng.IntN(2))
			}
			ms = append(ms, m)
		}
		for range 1 + rng.IntN(4) {
			join()
		}
		for run := range 4 {
			var plan haPlan
			for rounds := 0; ; rounds++ {
				if rounds > 8*int(parts)+10 {
					t.Fatalf("iteration %d, run %d: still moving after %d rounds: %+v", it, run, rounds, plan)
				}
				var moved bool
				if plan, moved = round(ms, parts, cfg); !moved {
					break
				}
			}
			load := make([]int, len(ms))
			for _, m := range plan.active {
				load[m]++
			}
			if slices.Max(load)-slices.Min(load) > 1 {
				t.Fatalf("iteration %d, run %d: settled unbalanced: %v", it, run, load)
			}
			// Standbys settle balanced too, when there is a choice (every
			// member a process of its own: threads of one process cannot
			// hold each other's copies; and fewer standbys than other
			// members), and no extra copy is left.
			procs := map[string]bool{}
			for i, m := range ms {
				procs[cmp.Or(m.process, fmt.Sprint("#", i))] = true
			}
			sbLoad := make([]int, len(ms))
			for i := range ms {
				sbLoad[i] = len(plan.standby[i])
			}
			if len(procs) == len(ms) && cfg.standbys < len(ms)-1 && slices.Max(sbLoad)-slices.Min(sbLoad) > 1 {
				t.Fatalf("iteration %d, run %d: standbys settled unbalanced: %v (actives %v)", it, run, plan.standby, plan.active)
			}
			for p := range parts {
				copies := 0
				for _, sb := range plan.standby {
					if slices.Contains(sb, p) {
						copies++
					}
				}
				if want := min(cfg.standbys, len(procs)-1); cfg.stateful(p) && copies != want {
					t.Fatalf("iteration %d, run %d: partition %d settled with %d standbys, want %d: %v", it, run, p, copies, want, plan.standby)
				}
			}
			if rng.IntN(2) == 0 {
				join()
			} else if len(ms) > 1 {
				i := rng.IntN(len(ms))
				ms = slices.Delete(ms, i, i+1)
			}
		}
	}
}

// TestHABalancerHoldsPendingActivesAsStandbys: i-b's warm-ups of 2 and 3
// caught up, so the leader moves them to i-b; the cooperative protocol
// gives them to nobody this generation (i-a revokes them first). i-b
// keeps them as standbys meanwhile, so the DBs its warm-ups kept open are
// handed to the active tasks when they arrive, not closed and reopened.
func TestHABalancerHoldsPendingActivesAsStandbys(t *testing.T) {
	t.Parallel()
	topics := map[string]int32{"a": 4, "b": 4}
	_, got, parts := balanceHA(t, topics, []haTestMember{
		{"i-a", []int32{0, 1, 2, 3}, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}},
		{"i-b", nil, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}},
	})
	for topic := range topics {
		if len(parts["member-i-a"][topic]) != 2 || len(parts["member-i-b"][topic]) != 0 {
			t.Fatalf("actives %v: want i-a to keep 2 of %s and i-b none this generation", parts, topic)
		}
	}
	moving := []int32{}
	for p := range int32(4) {
		if !slices.Contains(parts["member-i-a"]["a"], p) {
			moving = append(moving, p)
		}
	}
	if sb := got["member-i-b"]; !slices.Equal(sb.Standby, []int32{0, 1, 2, 3}) || len(sb.WarmUp) != 0 {
		t.Fatalf("i-b's standby assignment %+v: want standbys of every partition (those i-a keeps and the moving %v), no warm-up", sb, moving)
	}

}
