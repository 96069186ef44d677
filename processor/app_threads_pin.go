package processor

import (
	"slices"
)

// Hot-task pinning (issue #15): with tenant placement, a hot tenant's
// records reach partitions dedicated to it (topology.TenantPlacement), and
// so tasks of their own. With stream threads the group assignment goes one
// step further: in every process with more than one thread, the tasks of
// the dedicated partitions run on one thread (the process's lowest thread
// number) and every other task on the other threads. A hot tenant's burst
// then fills its own thread's transactions, commits and fetches; the
// quiet tenants' tasks commit on their own producers, at their own
// cadence, and do not wait for the hot tenant's flushes and EndTxn.
//
// Pinning moves partitions only between threads of one process, after
// the balanced, sticky assignment across processes (balanceSticky): the
// number of partitions per process is what it would be without pinning,
// and a partition that moves finds its state on the process's disk. A
// process with one thread is not affected; neither is co-partitioning
// (a partition number still goes to one member whole).

// WithPinnedPartitions sets Config.PinnedPartitions: the partition numbers
// whose tasks run on one stream thread of each process, apart from the
// others. Default: the partitions dedicated to hot tenants by the
// topology's placements (topology.WithPlacement). WithPinnedPartitions()
// with none pins nothing.
func WithPinnedPartitions(parts ...int32) Option {
	return func(c *Config) { c.PinnedPartitions = append([]int32{}, parts...) } // empty, not nil: none
}

// pinnedPartitions is the set the group leader pins (haConfig.hot).
func (a *App) pinnedPartitions() map[int32]bool {
	parts := a.cfg.PinnedPartitions
	if parts == nil {
		for _, p := range a.topo.Placements() {
			if p.Err() == nil {
				parts = append(parts, p.DedicatedPartitions()...)
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	hot := map[int32]bool{}
	for _, p := range parts {
		hot[p] = true
	}
	return hot
}

// pinOwned is the ownership the balanced assignment across members
// starts from when pinning: each process's partitions dealt round-robin
// over its threads. Pinning leaves a process's threads unevenly loaded
// (one thread runs the hot partitions, however many), which the member
// balance would otherwise "fix" every round by moving partitions, possibly
// to another process; seen this way every process keeps its partitions
// from one round to the next, and pinHot then places them on its threads.
func pinOwned(members []haMember, threads map[string][]int) []map[int32]bool {
	owned := make([]map[int32]bool, len(members))
	for m := range members {
		owned[m] = members[m].owned
	}
	for _, ms := range threads {
		if len(ms) < 2 {
			continue
		}
		var parts []int32
		for _, m := range ms {
			for p := range members[m].owned {
				parts = append(parts, p)
			}
		}
		slices.Sort(parts)
		for _, m := range ms {
			owned[m] = map[int32]bool{}
		}
		for i, p := range parts {
			owned[ms[i%len(ms)]][p] = true
		}
	}
	return owned
}

// processThreads lists each process's members by thread number.
func processThreads(members []haMember) map[string][]int {
	threads := map[string][]int{}
	for m, mb := range members {
		if mb.process != "" {
			threads[mb.process] = append(threads[mb.process], m)
		}
	}
	for _, ms := range threads {
		slices.SortStableFunc(ms, func(a, b int) int { return members[a].thread - members[b].thread })
	}
	return threads
}

// pinHot rewrites target (partition number -> member index) so that in
// every process with several threads the hot partitions go to its lowest
// numbered thread and the others to its other threads, balanced and sticky
// among them (balanceSticky over the process's quiet partitions, from who
// owns them now).
func pinHot(members []haMember, target []int, hot map[int32]bool, threads map[string][]int) []int {
	if len(hot) == 0 {
		return target
	}
	out := slices.Clone(target)
	for _, ms := range threads {
		if len(ms) < 2 {
			continue
		}
		in := func(m int) bool { return slices.Contains(ms, m) }
		var quiet []int32
		for p, m := range out {
			switch {
			case !in(m):
			case hot[int32(p)]:
				out[p] = ms[0]
			default:
				quiet = append(quiet, int32(p))
			}
		}
		if len(quiet) == 0 {
			continue
		}
		qt := ms[1:]
		owned := make([]map[int32]bool, len(qt))
		for i, m := range qt {
			owned[i] = map[int32]bool{}
			for j, p := range quiet {
				if members[m].owned[p] {
					owned[i][int32(j)] = true
				}
			}
		}
		for j, i := range balanceSticky(owned, int32(len(quiet))) {
			out[quiet[j]] = qt[i]
		}
	}
	return out
}
