package processor

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// High-availability assignment: standby replicas and KIP-441 warm-ups.
//
// The unit of assignment is a partition number p: co-partitioning gives
// one member partition p of every topic, so it runs every task of p (one
// per sub-topology). Standbys and warm-ups are per partition number too:
// a member holding a standby of p tails the changelogs of every stateful
// task of p into its local task DBs (standby.go).
//
// Each member reports in its join metadata, per partition number it has
// complete local state for (every stateful task of p running, restoring,
// or kept as a standby), its lag: changelog records its state is behind,
// summed over the tasks of p (0 for running tasks). A member without
// state lags by the changelogs' end offsets, which the leader lists as it
// assigns (as Kafka Streams does). The leader then assigns, in the
// spirit of Kafka Streams' HighAvailabilityTaskAssignor (KIP-441):
//
//  1. the balanced, sticky target owner of each p, as copartitionBalancer
//     always computed it (balanceSticky);
//  2. p goes to its target when the target is caught up (lag at most the
//     acceptable recovery lag; partitions without stateful tasks are
//     caught up everywhere). Otherwise it stays with its current owner if
//     that one is caught up (stickiness), else goes to the caught-up
//     member with the least lag, and the target gets p as a warm-up: a
//     standby that exists to catch up, after which a probing rebalance
//     (members holding warm-ups force one every ProbingRebalanceInterval)
//     finds the target caught up and moves p. When no member is caught
//     up, p goes to the most caught-up member if it has less lag than the
//     target (Kafka Streams' TaskMovement: a standby that fell behind
//     restores less than a member without state), and the target warms
//     up; else p goes to its target. At most MaxWarmupReplicas warm-ups
//     exist at once (Kafka Streams' max.warmup.replicas), given in
//     partition order; a target past the cap gets its warm-up in a later
//     round (the rounds that move the earlier warm-ups' partitions);
//  3. each stateful p gets up to StandbyReplicas standbys on processes
//     other than its active owner's and its warm-up's (one copy per
//     process), placed by load as Kafka Streams places them: standby
//     counts balanced within one where the processes allow it, not by lag
//     (a placement following lags chases them round after round). When
//     such a standby is not caught up and another member holds a caught-up
//     copy, that copy stays as a standby and the new one becomes a
//     warm-up, dropped once caught up (Kafka Streams' standby task
//     movements); past MaxWarmupReplicas the caught-up copy stays instead;
//  4. a p moving to a member that does not own it yet is revoked from its
//     owner in this round and assigned in the next (cooperative, KIP-429):
//     meanwhile the new owner keeps, or starts, tailing it as a standby, so
//     it restores only the tail once it gets it.
//
// Active partitions travel as the consumer protocol's partitions; the
// standby and warm-up sets travel in the assignment's UserData
// (standbyAssignment), which ParseSyncAssignment hands to the session.

// joinUserData is the user data of a member's join metadata: the instance
// info every instance reads (decodeMemberInfoUserData), plus the lags the
// leader's assignment reads.
type joinUserData struct {
	memberInfo
	// Lags maps a partition number to the changelog records the member's
	// local state of every stateful task of it is behind in total. A
	// partition number absent here: no (complete) local state.
	Lags map[int32]int64 `json:"lags,omitempty"`
	// Rejoin counts the rebalances this member forced over orphaned
	// partitions (app_orphans.go): the metadata of such a rejoin differs
	// from the stored one, so the coordinator rebalances.
	Rejoin uint32 `json:"rejoin,omitempty"`
}

// standbyAssignment is the UserData of a member's sync assignment.
type standbyAssignment struct {
	// Standby are the partition numbers whose stateful tasks the member
	// keeps as standbys.
	Standby []int32 `json:"standby,omitempty"`
	// WarmUp are the partition numbers the member warms up: standbys it
	// is meant to take over as active once caught up. The member forces a
	// probing rebalance every ProbingRebalanceInterval while it has any.
	WarmUp []int32 `json:"warmup,omitempty"`
}

// all is every partition number the member keeps a copy of.
func (a standbyAssignment) all() []int32 {
	out := slices.Concat(a.Standby, a.WarmUp)
	slices.Sort(out)
	return slices.Compact(out)
}

// haConfig is what the leader's assignment needs beyond the members.
type haConfig struct {
	standbys   int
	acceptable int64
	// maxWarmups caps the warm-ups in the group at once.
	maxWarmups int
	// ends are the changelog end offsets of each partition number,
	// summed over its stateful tasks: the lag of a member without state
	// (nil or absent: unknown, never caught up).
	ends map[int32]int64
	// stateful reports whether any task of partition number p has logged
	// stores; nil: every partition is stateless (no standbys, no warm-ups).
	stateful func(p int32) bool
	// hot are the partition numbers pinned to one stream thread of
	// their process (pinHot, app_threads_pin.go); nil: no pinning.
	hot map[int32]bool
}

// haMember is one member as the HA assignment sees it.
type haMember struct {
	owned map[int32]bool  // partition numbers it owns now
	lags  map[int32]int64 // reported lags (joinUserData.Lags)
	// process names the process the member runs in (memberInfo.Instance:
	// stream threads of one App share it, app_threads.go); "" counts as a
	// process of its own. thread is the member's stream thread in it.
	process string
	thread  int
}

// haPlan is the result of assignHA, indexed like its members.
type haPlan struct {
	active  []int     // partition number -> member index
	standby [][]int32 // member index -> standby partition numbers (sorted)
	warmup  [][]int32 // member index -> warm-up partition numbers (sorted)
}

// balanceSticky is copartitionBalancer's balanced, sticky assignment of
// partition numbers 0..parts-1 to members (index per partition), members
// in their sort order.
//
// Balanced within one: every member gets base partition numbers and
// `extra` of them one more. A ceiling quota for everyone is not enough:
// with 4 partitions over 3 members two owners of 2 would keep theirs and
// leave the third member nothing.
func balanceSticky(owned []map[int32]bool, parts int32) []int {
	n := len(owned)
	base, extra := int(parts)/n, int(parts)%n
	got := make([]int, n)
	assigned := make([]int, parts)
	for p := range assigned {
		assigned[p] = -1
	}
	// Sticky passes: a member keeps the partition numbers it owns, up to
	// base, and then up to `extra` members keep one more.
	for p := range parts {
		for m := range owned {
			if owned[m][p] && got[m] < base {
				got[m]++
				assigned[p] = m
				break
			}
		}
	}
	for p := range parts {
		if assigned[p] >= 0 || extra == 0 {
			continue
		}
		for m := range owned {
			if owned[m][p] && got[m] == base {
				got[m]++
				assigned[p] = m
				extra--
				break
			}
		}
	}
	// Fill pass: unowned numbers go to the least loaded member. The
	// sticky passes left every load at most base+1 with at most the
	// original extra members there, so this ends with loads base or base+1.
	for p := range parts {
		if assigned[p] >= 0 {
			continue
		}
		best := 0
		for m := 1; m < n; m++ {
			if got[m] < got[best] {
				best = m
			}
		}
		got[best]++
		assigned[p] = best
	}
	return assigned
}

// assignHA computes actives, standbys and warm-ups (see the comment at the
// top of this file). members must be in their sort order and non-empty.
func assignHA(members []haMember, parts int32, cfg haConfig) haPlan {
	n := len(members)
	owned := make([]map[int32]bool, n)
	for i, m := range members {
		owned[i] = m.owned
	}
	var target []int
	if len(cfg.hot) > 0 {
		threads := processThreads(members)
		target = pinHot(members, balanceSticky(pinOwned(members, threads), parts), cfg.hot, threads)
	} else {
		target = balanceSticky(owned, parts)
	}
	plan := haPlan{active: make([]int, parts), standby: make([][]int32, n), warmup: make([][]int32, n)}
	stateful := func(p int32) bool { return cfg.stateful != nil && cfg.stateful(p) }
	lag := func(m int, p int32) (int64, bool) {
		if !stateful(p) {
			return 0, true
		}
		if l, ok := members[m].lags[p]; ok {
			return l, true
		}
		// No state: the whole changelogs to restore, as Kafka Streams
		// counts it, so small tasks move to a new member at once.
		l, ok := cfg.ends[p]
		return l, ok
	}
	caughtUp := func(m int, p int32) bool {
		l, ok := lag(m, p)
		return ok && l <= cfg.acceptable
	}
	// sameProcess: members a and b share a process, and so a state
	// directory: a copy on one is no copy for the other.
	sameProcess := func(a, b int) bool {
		return a == b || members[a].process != "" && members[a].process == members[b].process
	}
	// mostCaughtUp is the member with the least lag on p (the owner
	// among equals), -1 when none has state.
	mostCaughtUp := func(owner int, p int32) (int, int64) {
		best, bestLag := -1, int64(0)
		for m := range members {
			if l, ok := lag(m, p); ok && (best < 0 || l < bestLag || l == bestLag && m == owner) {
				best, bestLag = m, l
			}
		}
		return best, bestLag
	}
	load := make([]int, n) // actives and copies, for tie-breaks
	warmups := 0
	for p := range parts {
		t := target[p]
		active := t
		if !caughtUp(t, p) {
			owner := -1
			for m := range members {
				if members[m].owned[p] {
					owner = m
					break
				}
			}
			if owner >= 0 && caughtUp(owner, p) {
				active = owner
			} else if best, bestLag := mostCaughtUp(owner, p); best >= 0 {
				// Caught up, or at least fresher than the target: a
				// standby that fell behind in a burst still restores far
				// less than a member without state.
				if tl, ok := lag(t, p); !ok || bestLag < tl {
					active = best
				}
			}
			switch {
			case active == t:
			case sameProcess(active, t):
				// Moving between threads of one process: t finds the
				// state on its disk, there is nothing to warm up.
				active = t
			case warmups < cfg.maxWarmups:
				plan.warmup[t] = append(plan.warmup[t], p)
				load[t]++
				warmups++
			}
		}
		plan.active[p] = active
		load[active]++
	}
	// proc[m] is the first member of m's process; held[p][proc[m]]: m's
	// process holds a copy of p (the active, a warm-up or a standby).
	proc := make([]int, n)
	for m := range members {
		for !sameProcess(m, proc[m]) {
			proc[m]++
		}
	}
	held := make([][]bool, parts)
	warming := make([]bool, parts)
	for p := range parts {
		held[p] = make([]bool, n)
		held[p][proc[plan.active[p]]] = true
	}
	for m, ps := range plan.warmup {
		for _, p := range ps {
			held[p][proc[m]], warming[p] = true, true
		}
	}
	standbys := make([]int, n) // standbys per member, in-flight ones aside
	moveStandby := func(from, to int, p int32) {
		if from >= 0 {
			plan.standby[from] = slices.DeleteFunc(plan.standby[from], func(q int32) bool { return q == p })
			held[p][proc[from]] = false
			standbys[from]--
			load[from]--
		}
		plan.standby[to] = append(plan.standby[to], p)
		held[p][proc[to]] = true
		standbys[to]++
		load[to]++
	}
	for p := range parts {
		if !stateful(p) {
			continue
		}
		active := plan.active[p]
		// A partition moving to a member that does not own it arrives in
		// the next round; the member tails it meanwhile.
		if !members[active].owned[p] {
			for m := range members {
				// From a sibling thread the state is local already:
				// tailing it as a standby would be a second writer.
				if !sameProcess(m, active) && members[m].owned[p] {
					plan.standby[active] = append(plan.standby[active], p)
					break
				}
			}
		}
		// By load, not by lag, as Kafka Streams places standbys: a
		// placement following lags would chase them round after round.
		// Caught-up copies elsewhere are kept below while needed.
		cands := make([]int, n)
		for m := range cands {
			cands[m] = m
		}
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			return standbys[a] < standbys[b] || standbys[a] == standbys[b] && load[a] < load[b]
		})
		placed := 0
		for _, m := range cands {
			if placed < cfg.standbys && !held[p][proc[m]] {
				moveStandby(-1, m, p)
				placed++
			}
		}
	}
	// mayGet: y may get x's standby p (a sibling thread of x may).
	mayGet := func(x, y int, p int32) bool {
		return !held[p][proc[y]] || proc[y] == proc[x]
	}
	// shift balances the standbys by one: along a chain (x gives y a
	// standby y may get, y gives the next member one, ...) from a member
	// with the most to one with two fewer, the shortest chain.
	shift := func() bool {
		most := slices.Max(standbys)
		from := make([]int, n) // the chain's previous member; -1 start, -2 unreached
		via := make([]int32, n)
		var queue []int
		for m := range members {
			from[m] = -2
			if standbys[m] == most {
				from[m] = -1
				queue = append(queue, m)
			}
		}
		dst := -1
		for len(queue) > 0 && dst < 0 {
			x := queue[0]
			queue = queue[1:]
			for y := range members {
				if from[y] != -2 {
					continue
				}
				p := int32(-1) // the standby y gets
				for _, q := range plan.standby[x] {
					if plan.active[q] != x && mayGet(x, y, q) {
						p = q
						break
					}
				}
				if p < 0 {
					continue
				}
				from[y], via[y] = x, p
				if standbys[y] <= most-2 {
					dst = y
					break
				}
				queue = append(queue, y)
			}
		}
		// From the chain's end: each move checked as it is made (one
		// partition twice on the chain may land twice in one process).
		for y := dst; y >= 0 && from[y] >= 0; y = from[y] {
			if !mayGet(from[y], y, via[y]) {
				return false
			}
			moveStandby(from[y], y, via[y])
		}
		return dst >= 0
	}
	// Each shift lowers the sum of the squared counts: this ends.
	for shift() {
	}
	// A balanced standby that is not caught up warms up while a caught-up
	// copy elsewhere stays a standby; the round after it caught up drops
	// that copy (Kafka Streams' assignStandbyTaskMovements). Past the
	// warm-up cap, or while p warms up for its active, the caught-up copy
	// stays instead and the balanced member gets p in a later round.
	for p := range parts {
		for m := range members {
			if plan.active[p] == m || !slices.Contains(plan.standby[m], p) || caughtUp(m, p) {
				continue
			}
			src := -1
			for o := range members {
				if l, ok := members[o].lags[p]; ok && l <= cfg.acceptable && !held[p][proc[o]] && (src < 0 || l < members[src].lags[p]) {
					src = o
				}
			}
			if src < 0 {
				continue
			}
			moveStandby(m, src, p)
			if !warming[p] && warmups < cfg.maxWarmups {
				plan.warmup[m] = append(plan.warmup[m], p)
				held[p][proc[m]], warming[p] = true, true
				warmups++
			}
		}
	}
	for m := range members {
		slices.Sort(plan.standby[m])
		plan.standby[m] = slices.Compact(plan.standby[m])
		slices.Sort(plan.warmup[m])
	}
	return plan
}

// haSyncAssignment is a balance plan whose members' assignments carry
// their standbyAssignment as UserData.
type haSyncAssignment struct {
	plan     *kgo.BalancePlan
	userData map[string][]byte // member id -> encoded standbyAssignment
}

func (h haSyncAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := h.plan.IntoSyncAssignment()
	for i := range out {
		ud, ok := h.userData[out[i].MemberID]
		if !ok {
			continue
		}
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // kgo just wrote it; cannot happen
		}
		ma.UserData = ud
		out[i].MemberAssignment = ma.AppendTo(nil)
	}
	return out
}

// parseStandbyAssignment reads the standby assignment from a sync
// assignment; none (an older leader, or no user data) is the empty one.
func parseStandbyAssignment(assignment []byte) standbyAssignment {
	var ma kmsg.ConsumerMemberAssignment
	var sa standbyAssignment
	if len(assignment) == 0 || ma.ReadFrom(assignment) != nil || len(ma.UserData) == 0 {
		return sa
	}
	if json.Unmarshal(ma.UserData, &sa) != nil {
		return standbyAssignment{}
	}
	return sa
}
