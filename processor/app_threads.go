package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/topology"
)

// Stream threads.
//
// An App runs Config.Threads record loops (WithThreads). Each thread is a
// group member of its own, with its own static instance id
// ("<instance>-t<i>"; the instance id itself with one thread, so a
// single-threaded App keeps the identity, the transactional id and the
// frontier records it always had) and therefore its own transactional
// producer ("<app>-<instance>-t<i>"), frontier controller, commit
// checkpoints and frontier record. Commits of different threads overlap:
// while one thread flushes and ends its transaction the other processes,
// and each thread's transaction covers only its tasks' inputs, outputs
// and changelogs, which is what exactly-once needs (a task's inputs are
// consumed by one member, its changelog written by that member's
// producer).
//
// What the threads share is the process: the state directory and its
// Badger DB (a task DB per task, so a task that moves between threads of
// the process finds its local state and restores only the changelog tail
// it is missing), the HTTP server and the query registry, metrics, the
// failure hazard, the poison registry, the frontier watcher. The App stays
// one facade: Query*, /tasks, /frontier and the dashboard answer for the
// tasks of every thread.
//
// The balancer sees threads as members, so co-partitioning holds per
// member as before (partition p of every topic on one thread). Each
// member's join metadata names its process (memberInfo.Instance, the
// App's instance id, which query routing already used): the leader never
// places a standby or warm-up of a partition on the process that runs it
// (a sibling thread shares its state directory: a copy there protects
// nothing), never two copies of one partition on one process, and a
// partition moving between threads of one process goes straight to its new
// owner without being tailed as a standby in between. Members report their
// lags per process (haLags reads the App's tasks): a sibling of the owner
// is caught up by definition.
//
// Only one user touches a task's local state at a time: the restore of a
// task (or a standby) waits for the task's lease (taskLeases), held until
// the thread that ran it closed it. The cooperative protocol revokes a
// partition before it assigns it elsewhere, but the thread losing it may
// still be committing its last transaction when the gaining thread
// starts the restore.
//
// An error in one thread ends the App: the other threads are stopped
// (each commits what it has and leaves the group) and Run returns the
// error naming the thread. A corrupt local state is the exception: every
// thread ends its session, the shared DB is rebuilt, and the threads join
// again.

// WithThreads sets Config.Threads: how many record loops (stream threads)
// the App runs, each its own group member with its own transactional
// producer. 0 takes DefaultThreads.
func WithThreads(n int) Option { return func(c *Config) { c.Threads = n } }

// DefaultThreads is the number of stream threads of an App that does not
// set Config.Threads: one. A second thread pays only when a core is free
// for it, and the typical small deployment (and this project's 2-core
// development machine) runs the broker on the same cores: there the
// second producer's transactions (twice the EndTxn round trips and
// transaction markers for the broker to write) compete with the broker
// for the CPU the second loop would use. Measured with `bench --workloads
// count --systems tidemark-adaptive,tidemark-adaptive-2t` on that machine
// (broker on the same 2 cores, shared with other work, load average
// 10-17), five runs, the order of the systems alternated: max throughput
// 2 threads / 1 thread 1.69, 0.82 (100k records), 0.75, 1.47, 0.89 (300k
// records; the system measured first tends to win, geometric mean 1.06);
// p99 staleness at 5k/s 0.85, 1.40, 1.38 and at 20k/s 4.3, 1.08, 0.97.
// No consistent gain, so one thread, which also keeps the instance's
// identity (its transactional id and frontier record) as it was. On a
// host with cores to spare (the broker elsewhere),
// WithThreads(runtime.GOMAXPROCS(0)/2) or more is the setting to measure.
const DefaultThreads = 1

// maxThreads bounds Config.Threads: each thread is a group member, a
// producer and a set of fetch sessions.
const maxThreads = 64

// threadCount is Config.Threads with its default.
func (c *Config) threadCount() int {
	if c.Threads == 0 {
		return DefaultThreads
	}
	return c.Threads
}

func checkThreads(n int) error {
	if n < 0 || n > maxThreads {
		return fmt.Errorf("config: Threads %d must be between 1 and %d (0 takes the default %d)", n, maxThreads, DefaultThreads)
	}
	return nil
}

// appThread is one record loop's state that outlives its sessions.
type appThread struct {
	app   *App
	index int

	members members // member ids its sessions synced with (app_fenced_duplicate.go)

	// Loop goroutine only.
	isolate           bool        // see app_rejected.go
	commitRejects     int         // see session.commitRejected
	commitWatch       commitWatch // see app_commitwatch.go
	lastReflectedLog  time.Time   // see app_reflected.go
	lastInstanceFence time.Time   // see appThread.fencedAgain (app_fenced_duplicate.go)
	commitTotals      commitTotals
	// fsess and fss are the frontier state of the thread's session
	// (frontierState, app_frontier.go).
	fsess *session
	fss   *sessionFrontier

	// dropped exports the drops of the thread's tasks (app_dropped.go: it
	// tells a task gone from one recreated by the tasks it is shown, so
	// each thread needs its own); the counters are the App's.
	dropped *droppedRecords

	// turned is when the thread's loop last showed it is not stuck (unix
	// nanoseconds; 0 while no loop runs): app_liveness.go.
	turned atomic.Int64
	// contact is when its group client last heard from the coordinator
	// (app_contact.go).
	contact groupContact

	ready atomic.Bool  // every task assigned to the thread runs
	tasks atomic.Int64 // tasks running
	lag   atomic.Int64 // records behind the inputs' end offsets
	// paused counts the input partitions the thread's loop paused
	// (app_fair.go).
	paused atomic.Int64
	// client is the current session's group client, nil between
	// sessions: the peer detector forces a rejoin through it
	// (app_peers.go).
	client atomic.Pointer[kgo.Client]
}

func newThreads(n int) []*appThread {
	if n == 0 {
		n = DefaultThreads
	}
	ths := make([]*appThread, n)
	for i := range ths {
		ths[i] = &appThread{index: i}
	}
	return ths
}

// droppedRecords is th's drop exporter: the App's for thread 0, one
// sharing its counters for the others.
func (th *appThread) droppedRecords() *droppedRecords {
	if th.dropped == nil {
		d := th.app.metrics.dropped
		if th.index != 0 {
			d = &droppedRecords{total: d.total, every: d.every, sites: map[dropSite]*dropState{}}
		}
		th.dropped = d
	}
	return th.dropped
}

// threadInstance is th's static group instance id: the App's instance id
// with one thread, "<instance>-t<i>" with more.
func (a *App) threadInstance(th *appThread) string {
	return threadInstanceID(a.cfg.InstanceID, th.index, len(a.threads))
}

func threadInstanceID(instance string, i, n int) string {
	if n <= 1 {
		return instance
	}
	return instance + "-t" + strconv.Itoa(i)
}

// threadInstances are the instance ids of every thread of the App.
func (a *App) threadInstances() []string {
	out := make([]string, len(a.threads))
	for i, th := range a.threads {
		out[i] = a.threadInstance(th)
	}
	return out
}

// errRebuildThreads ends a thread's loop when its session found the
// shared local state corrupt: runThreads rebuilds it once every thread
// stopped.
var errRebuildThreads = errors.New("local state must be rebuilt")

// rebuilding is set while the threads stop for a rebuild: they end their
// sessions without leaving the group (they join again at once).
var rebuildingApps sync.Map // *App → struct{}

// leave reports whether a thread whose context ended leaves the group: on
// shutdown and on an error that stops the App, but not for a rebuild.
func (th *appThread) leave() bool {
	_, rebuilding := rebuildingApps.Load(th.app)
	return !rebuilding
}

// runThreads runs the App's record loops until ctx (Run's group context)
// is done or one of them fails. appCtx is Run's own context.
func (a *App) runThreads(appCtx, ctx context.Context) error {
	for _, th := range a.threads {
		th.app = a
	}
	if len(a.threads) == 1 {
		return a.loop(ctx, a.threads[0])
	}
	a.log.Info("stream threads", "threads", len(a.threads), "instances", a.threadInstances())
	for {
		g, gctx := errgroup.WithContext(ctx)
		for _, th := range a.threads {
			g.Go(func() error {
				err := a.loop(gctx, th)
				if err != nil && errors.Is(err, errRebuildThreads) {
					rebuildingApps.Store(a, struct{}{})
				}
				if err != nil {
					return fmt.Errorf("processor: thread %d (%s): %w", th.index, a.threadInstance(th), err)
				}
				return nil
			})
		}
		err := g.Wait()
		rebuildingApps.Delete(a)
		if ctx.Err() != nil || appCtx.Err() != nil {
			return nil
		}
		if err == nil || !errors.Is(err, errRebuildThreads) {
			return err
		}
		if rerr := a.rebuildState(err); rerr != nil {
			return rerr
		}
		a.hazard.Load().sessionFailed("rebuild")
	}
}

// setReady records whether every task of th runs, and the App is ready
// when every thread is.
func (a *App) setReady(th *appThread, ready bool) {
	a.threadSums.Lock()
	defer a.threadSums.Unlock()
	th.ready.Store(ready)
	all := true
	for _, t := range a.threads {
		all = all && t.ready.Load()
	}
	a.ready.Store(all)
}

// setThreadTasks records th's running tasks: the tasks gauge is the sum
// over threads, the thread gauge th's.
func (a *App) setThreadTasks(th *appThread, n int) {
	a.setThreadSum(th, func(t *appThread) *atomic.Int64 { return &t.tasks }, int64(n), a.metrics.tasks)
	a.threadMetrics().tasks.WithLabelValues(strconv.Itoa(th.index)).Set(float64(n))
}

// setThreadLag records th's consumer lag: the lag gauge is the sum over
// threads.
func (a *App) setThreadLag(th *appThread, lag int64) {
	a.setThreadSum(th, func(t *appThread) *atomic.Int64 { return &t.lag }, lag, a.metrics.lag)
	a.threadMetrics().lag.WithLabelValues(strconv.Itoa(th.index)).Set(float64(lag))
}

// setThreadPaused records the input partitions th paused: the paused
// partitions gauge is the sum over threads.
func (a *App) setThreadPaused(th *appThread, n int) {
	a.setThreadSum(th, func(t *appThread) *atomic.Int64 { return &t.paused }, int64(n), a.metrics.fair.paused)
}

// setThreadSum stores v as th's value of field and sets sum to the total
// over threads. Under threadSums: two threads storing at once could
// otherwise each compute a total without the other's value and leave the
// stale one last.
func (a *App) setThreadSum(th *appThread, field func(*appThread) *atomic.Int64, v int64, sum prometheus.Gauge) {
	a.threadSums.Lock()
	defer a.threadSums.Unlock()
	field(th).Store(v)
	var total int64
	for _, t := range a.threads {
		total += field(t).Load()
	}
	sum.Set(float64(total))
}

// publishSnapshot publishes th's controller snapshot for /frontier:
// "threads" has every thread's, and the "controller" section (also
// ControllerSnapshot, the web view and the demo dashboard) the stalest
// thread's, the one with the highest observed p99 (the lowest index on a
// tie). Thread 0's alone would hide a hot thread: with pinned partitions
// thread 0 runs the hot tenants, or none of them.
func (a *App) publishSnapshot(th *appThread, snap frontier.Snapshot) {
	a.pub.mu.Lock()
	defer a.pub.mu.Unlock()
	if a.pub.snapshots == nil {
		a.pub.snapshots = map[int]frontier.Snapshot{}
	}
	a.pub.snapshots[th.index] = snap
	best := -1
	for i, s := range a.pub.snapshots {
		if b := a.pub.snapshots[best]; best < 0 || s.ObservedP99 > b.ObservedP99 || s.ObservedP99 == b.ObservedP99 && i < best {
			best = i
		}
	}
	a.pub.snapshot = a.pub.snapshots[best]
}

// threadSnapshots are the threads' last published controller snapshots.
func (a *App) threadSnapshots() map[int]frontier.Snapshot {
	a.pub.mu.RLock()
	defer a.pub.mu.RUnlock()
	out := make(map[int]frontier.Snapshot, len(a.pub.snapshots))
	for i, s := range a.pub.snapshots {
		out[i] = s
	}
	return out
}

// taskLeases grants each task's local state to one user at a time across
// the App's threads: a running or restoring task, or a standby.
type taskLeases struct {
	mu   sync.Mutex
	held map[topology.TaskID]*lease
	// log hears of a wait that lasts leaseWarnAfter or longer (nil: the
	// wait is not logged); warnAfter is that, 0 taking leaseWarnAfter.
	log       *slog.Logger
	warnAfter time.Duration
}

// lease is a held lease: who holds it, since when, and a channel closed on
// its release.
type lease struct {
	holder string
	since  time.Time
	done   chan struct{}
}

// leaseWarnAfter is how long a wait for a task's lease goes on before it
// is logged (and logged again): the holder is a sibling thread ending its
// last transaction over the task, which the transaction timeout bounds,
// so a longer wait means the holder is stuck or never let go.
const leaseWarnAfter = 10 * time.Second

// acquire waits until no one holds id's lease, takes it for user (a label
// naming the thread and the use, for the logs) and returns its release
// (idempotent). It fails only when ctx ends first. A wait of
// leaseWarnAfter or longer is logged at warn level with the holder, and
// again every leaseWarnAfter: a thread cannot start a task while a sibling
// keeps its state, and that should not pass in silence.
func (l *taskLeases) acquire(ctx context.Context, id topology.TaskID, user string) (release func(), err error) {
	start := time.Now()
	every := l.warnAfter
	if every <= 0 {
		every = leaseWarnAfter
	}
	var warn *time.Timer
	defer func() {
		if warn != nil {
			warn.Stop()
		}
	}()
	for {
		l.mu.Lock()
		log := l.log
		ls, busy := l.held[id]
		if !busy {
			if l.held == nil {
				l.held = map[topology.TaskID]*lease{}
			}
			ls = &lease{holder: user, since: time.Now(), done: make(chan struct{})}
			l.held[id] = ls
			l.mu.Unlock()
			if waited := time.Since(start); log != nil && waited >= every {
				log.Warn("task lease acquired after a long wait", "task", id.String(), "by", user, "waited", waited.Round(time.Millisecond))
			}
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, id)
					l.mu.Unlock()
					close(ls.done)
				})
			}, nil
		}
		holder, since := ls.holder, ls.since
		l.mu.Unlock()
		if warn == nil {
			warn = time.NewTimer(max(0, every-time.Since(start)))
		}
		select {
		case <-ls.done:
		case <-warn.C:
			warn.Reset(every)
			if log != nil {
				log.Warn("waiting for another stream thread to close a task's local state", "task", id.String(), "waiter", user,
					"holder", holder, "held_for", time.Since(since).Round(time.Millisecond), "waited", time.Since(start).Round(time.Millisecond))
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s: wait for %s to close its local state: %w", id, holder, ctx.Err())
		}
	}
}

// setLogger sets the logger of long waits.
func (l *taskLeases) setLogger(log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = log
}

// holder names who holds id's lease and since when; "" when no one does.
func (l *taskLeases) holder(id topology.TaskID) (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.held[id]; ok {
		return ls.holder, ls.since
	}
	return "", time.Time{}
}

// threadJSON is one stream thread in GET /frontier's "threads".
type threadJSON struct {
	Thread     int            `json:"thread"`
	Instance   string         `json:"instance"` // its group instance id
	Tasks      int64          `json:"tasks"`
	Ready      bool           `json:"ready"`
	Controller controllerJSON `json:"controller"`
}

// threadsJSON is GET /frontier's "threads": nil with a single thread,
// whose controller is the "controller" section already.
func (a *App) threadsJSON() []threadJSON {
	if len(a.threads) < 2 {
		return nil
	}
	snaps := a.threadSnapshots()
	out := make([]threadJSON, len(a.threads))
	for i, th := range a.threads {
		out[i] = threadJSON{Thread: i, Instance: a.threadInstance(th), Tasks: th.tasks.Load(), Ready: th.ready.Load(),
			Controller: controllerJSONOf(snaps[i])}
	}
	return out
}
