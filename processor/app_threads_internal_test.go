package processor

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestAssignHAThreads checks the HA assignment over members that are
// stream threads of a few processes, against the rules of app_threads.go,
// with randomised ownership and lags (logged seed). Lags are reported per
// process, as haLags does: every thread of a process reports the same.
//
//   - a partition is active on one member (co-partitioning is per member);
//   - no standby or warm-up of p on the process running p;
//   - at most one copy of p per process;
//   - StandbyReplicas standbys whenever enough other processes exist;
//   - a partition moving between threads of one process is not tailed as
//     an in-flight standby, nor warmed up.
func TestAssignHAThreads(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	for iter := range 3000 {
		procs := 1 + rng.IntN(4)
		var members []haMember
		var procOf []int
		for pr := range procs {
			threads := 1 + rng.IntN(3)
			for range threads {
				members = append(members, haMember{owned: map[int32]bool{}, process: "p" + string(rune('a'+pr))})
				procOf = append(procOf, pr)
			}
		}
		n := len(members)
		parts := int32(1 + rng.IntN(12))
		standbys := rng.IntN(3)
		for p := range parts {
			if o := rng.IntN(n + 1); o < n {
				members[o].owned[p] = true
			}
		}
		// Per process lags: 0 where a thread of the process owns p,
		// random (or none) elsewhere.
		for pr := range procs {
			lags := map[int32]int64{}
			for p := range parts {
				owned := false
				for m := range n {
					owned = owned || procOf[m] == pr && members[m].owned[p]
				}
				switch {
				case owned:
					lags[p] = 0
				case rng.IntN(3) == 0:
					lags[p] = int64(rng.IntN(30_000))
				}
			}
			for m := range n {
				if procOf[m] == pr {
					members[m].lags = lags
				}
			}
		}
		plan := assignHA(members, parts, haConfig{standbys: standbys, acceptable: 10_000, maxWarmups: int(parts), stateful: func(int32) bool { return true }})
		for p := range parts {
			a := plan.active[p]
			copies := map[int]int{} // process -> copies of p (standby or warm-up)
			regular := 0
			for m := range n {
				sb, wu := slices.Contains(plan.standby[m], p), slices.Contains(plan.warmup[m], p)
				if !sb && !wu {
					continue
				}
				if m == a && sb && !wu {
					// The in-flight standby of a partition moving to a: only
					// from another process.
					for o := range n {
						if o != a && members[o].owned[p] && procOf[o] == procOf[a] {
							t.Fatalf("iter %d: partition %d moves between threads %d and %d of one process but is tailed as a standby", iter, p, o, a)
						}
					}
					continue
				}
				if procOf[m] == procOf[a] {
					t.Fatalf("iter %d: partition %d active on member %d has a copy (standby %v, warm-up %v) on sibling thread %d", iter, p, a, sb, wu, m)
				}
				copies[procOf[m]]++
				if copies[procOf[m]] > 1 {
					t.Fatalf("iter %d: partition %d has two copies on process %d", iter, p, procOf[m])
				}
				if sb {
					regular++
				}
			}
			warm := 0
			for m := range n {
				if slices.Contains(plan.warmup[m], p) {
					warm++
				}
			}
			if want := min(standbys, procs-1-warm); regular < want {
				t.Fatalf("iter %d: partition %d has %d standbys over %d processes, want %d (plan %+v)", iter, p, regular, procs, want, plan)
			}
		}
	}
}

// TestTaskLeases: a task's lease is held by one user at a time; a waiter
// gets it once released, and gives up when its context ends.
func TestTaskLeases(t *testing.T) {
	t.Parallel()
	var l taskLeases
	id := topology.TaskID{SubTopology: 0, Partition: 3}
	rel, err := l.acquire(context.Background(), id, "thread 0 task")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.acquire(context.Background(), topology.TaskID{SubTopology: 1, Partition: 3}, "thread 0 task")
	if err != nil {
		t.Fatalf("another task's lease: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(ctx, id, "thread 1 task"); err == nil {
		t.Fatal("acquired a held lease")
	}
	var got atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := l.acquire(context.Background(), id, "thread 1 task")
		if err == nil {
			got.Store(true)
			r()
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if got.Load() {
		t.Fatal("second user got the lease before the first released it")
	}
	rel()
	rel() // idempotent
	<-done
	if !got.Load() {
		t.Fatal("waiter did not get the released lease")
	}
}

// TestTaskLeaseWaitIsLogged: a wait for a lease that lasts says so at
// warn level, naming the task, the waiter and the holder, and again while
// it lasts; the waiter logs when it finally gets the lease.
func TestTaskLeaseWaitIsLogged(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	l := taskLeases{warnAfter: 40 * time.Millisecond}
	l.setLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	id := topology.TaskID{SubTopology: 0, Partition: 2}
	rel, err := l.acquire(context.Background(), id, "thread 1 task")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := l.holder(id); h != "thread 1 task" {
		t.Fatalf("holder %q", h)
	}
	done := make(chan error, 1)
	go func() {
		r, err := l.acquire(context.Background(), id, "thread 0 task")
		if err == nil {
			r()
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "waiting for another stream thread") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no repeated warning of the wait; log:\n%s", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := buf.String(); !strings.Contains(got, "task=0_2") || !strings.Contains(got, `waiter="thread 0 task"`) || !strings.Contains(got, `holder="thread 1 task"`) {
		t.Fatalf("the warning does not name the task, waiter and holder:\n%s", got)
	}
	rel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "task lease acquired after a long wait") {
		t.Fatalf("no line for the lease acquired at last:\n%s", buf.String())
	}
	if h, _ := l.holder(id); h != "" {
		t.Fatalf("released lease still held by %q", h)
	}
}

// TestThreadInstanceIDs: one thread keeps the instance id (and so the
// transactional id) of a single-threaded App; more get "-t<i>".
func TestThreadInstanceIDs(t *testing.T) {
	t.Parallel()
	if got := threadInstanceID("inst", 0, 1); got != "inst" {
		t.Fatalf("one thread: %q", got)
	}
	if got := threadInstanceID("inst", 1, 2); got != "inst-t1" {
		t.Fatalf("two threads: %q", got)
	}
	if err := validInstanceID(threadInstanceID("inst", 63, 64), 1); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, 65} {
		if checkThreads(n) == nil {
			t.Fatalf("Threads %d accepted", n)
		}
	}
}

// TestPinHot: with hot partitions, every process with several threads
// runs its hot partitions on its first thread and the others elsewhere;
// processes run their share of the partitions (by thread count); a second
// round with the result as ownership moves nothing (no churn).
// Randomised (logged seed).
func TestPinHot(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	for iter := range 2000 {
		var members []haMember
		procs := 1 + rng.IntN(3)
		for pr := range procs {
			for th := range 1 + rng.IntN(3) {
				members = append(members, haMember{owned: map[int32]bool{}, process: "p" + string(rune('a'+pr)), thread: th})
			}
		}
		parts := int32(2 + rng.IntN(10))
		hot := map[int32]bool{}
		for p := range parts {
			if rng.IntN(4) == 0 {
				hot[p] = true
			}
			if o := rng.IntN(len(members) + 1); o < len(members) {
				members[o].owned[p] = true
			}
		}
		cfg := haConfig{hot: hot}
		plan := assignHA(members, parts, cfg)
		threads := map[string]int{}
		for _, mb := range members {
			threads[mb.process]++
		}
		// The balance across members holds for the process totals: a
		// process of k threads runs k·base to k·(base+1) partitions.
		got := map[string]int{}
		for _, m := range plan.active {
			got[members[m].process]++
		}
		base := int(parts) / len(members)
		for pr, k := range threads {
			if got[pr] < k*base || got[pr] > k*(base+1) {
				t.Fatalf("iter %d: process %s of %d threads runs %d of %d partitions over %d members", iter, pr, k, got[pr], parts, len(members))
			}
		}
		for p, m := range plan.active {
			if threads[members[m].process] < 2 || len(hot) == 0 {
				continue // nothing to pin
			}
			if hot[int32(p)] != (members[m].thread == 0) {
				t.Fatalf("iter %d: partition %d (hot %v) on thread %d of %s", iter, p, hot[int32(p)], members[m].thread, members[m].process)
			}
		}
		again := slices.Clone(members)
		for i := range again {
			again[i].owned = map[int32]bool{}
		}
		for p, m := range plan.active {
			again[m].owned[int32(p)] = true
		}
		if next := assignHA(again, parts, cfg); !slices.Equal(next.active, plan.active) {
			t.Fatalf("iter %d: second round moved partitions: %v, then %v", iter, plan.active, next.active)
		}
	}
}

// TestThreadSumsDoNotLoseUpdates: threads that record their readiness and
// their task counts at the same moment leave the App ready and the tasks
// gauge at the sum. Each computed the App's value from a read of its
// siblings and stored it: the store of a thread that read a sibling's old
// state could land last, and the App stayed not ready (or the gauge stale)
// until the next assignment change.
func TestThreadSumsDoNotLoseUpdates(t *testing.T) {
	t.Parallel()
	a := &App{metrics: newAppMetrics("app"), threads: newThreads(2)}
	a.thm = newThreadMetrics(a.metrics.reg, "app")
	for _, th := range a.threads {
		th.app = a
	}
	for i := range 20000 {
		for _, th := range a.threads {
			a.setReady(th, false)
			a.setThreadTasks(th, 0)
		}
		var wg sync.WaitGroup
		for _, th := range a.threads {
			wg.Go(func() {
				a.setReady(th, true)
				a.setThreadTasks(th, 2)
			})
		}
		wg.Wait()
		if !a.Ready() {
			t.Fatalf("round %d: every thread ready, the App not", i)
		}
		if got := metricValue(a.metrics.tasks); got != 4 {
			t.Fatalf("round %d: tasks gauge %v, want 4", i, got)
		}
	}
}

// TestPinnedPartitionsOption: by default the placements' dedicated
// partitions are pinned; WithPinnedPartitions names others, and with none
// pins nothing.
func TestPinnedPartitionsOption(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	hot := topology.NewTenantPlacement(map[string][]int32{"flash": {0, 1}})
	b.Stream("in", serde.String(), serde.String()).To("out", topology.WithPlacement(hot))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{nil, "map[0:true 1:true]"},
		{[]Option{WithPinnedPartitions(3)}, "map[3:true]"},
		{[]Option{WithPinnedPartitions()}, "map[]"},
	} {
		a, err := NewApp(topo, append(tc.opts, WithBrokers("127.0.0.1:1"), WithStateDir(t.TempDir()))...)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(a.pinnedPartitions()); got != tc.want {
			t.Errorf("pinned %s, want %s", got, tc.want)
		}
	}
}

func TestIsThreadInstanceOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id   string
		want bool
	}{
		{"x", true}, {"x-t0", true}, {"x-t63", true},
		{"x-t64", false}, {"x-t01", false}, {"x-t", false}, {"x-t-1", false}, {"x-t1a", false}, {"xy", false}, {"y-t0", false},
	} {
		if got := isThreadInstanceOf("x", c.id); got != c.want {
			t.Errorf("isThreadInstanceOf(x, %q) = %v, want %v", c.id, got, c.want)
		}
	}
}

// The controller section of /frontier (ControllerSnapshot, the web view,
// the dashboard) follows the stalest stream thread, not thread 0: with
// pinned partitions thread 0 may be the idle one.
func TestControllerSnapshotIsTheStalestThreads(t *testing.T) {
	t.Parallel()
	a := &App{}
	th0, th1 := &appThread{app: a, index: 0}, &appThread{app: a, index: 1}
	a.publishSnapshot(th0, frontier.Snapshot{ObservedP99: 10 * time.Millisecond, Interval: time.Millisecond})
	a.publishSnapshot(th1, frontier.Snapshot{ObservedP99: 50 * time.Millisecond, Interval: 2 * time.Millisecond})
	if got := a.ControllerSnapshot(); got.Interval != 2*time.Millisecond {
		t.Fatalf("controller shows the thread with interval %v, want thread 1's (observed p99 50 ms)", got.Interval)
	}
	a.publishSnapshot(th1, frontier.Snapshot{ObservedP99: 5 * time.Millisecond, Interval: 3 * time.Millisecond})
	if got := a.ControllerSnapshot(); got.Interval != time.Millisecond {
		t.Fatalf("controller shows the thread with interval %v, want thread 0's once thread 1 is fresher", got.Interval)
	}
	if n := len(a.threadSnapshots()); n != 2 {
		t.Fatalf("%d thread snapshots, want 2", n)
	}
}

// A fenced thread counts as taken over only when it was a member itself
// and the group's member under its instance id is none of its own: a
// process restarted after a SIGKILL, fenced before its first join replaced
// the dead process's member, must not stop as a duplicate (make soak saw
// it do so once).
func TestReplacedByNeedsAMembershipOfOurOwn(t *testing.T) {
	t.Parallel()
	th := &appThread{}
	if th.replacedBy("dead-process-member") {
		t.Fatal("a thread that never synced counts as taken over by the member the group still lists")
	}
	th.rememberMember("ours-1")
	th.rememberMember("ours-2")
	if th.replacedBy("ours-1") {
		t.Fatal("a thread counts as taken over by its own earlier member")
	}
	if !th.replacedBy("newcomer") {
		t.Fatal("a thread that was a member is not taken over by another process's member")
	}
}
