package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// App runs a topology as a member of a Kafka consumer group: the live
// service. Start as many instances with the same application id as you
// like; the group spreads the partitions over them, keeping partition p of
// co-partitioned topics on one instance.
//
// Inside an instance each stream thread (WithThreads, default one;
// app_threads.go) is one goroutine that owns its tasks, its transactional
// session and its frontier controller: records are processed, committed
// and applied in one order, so the commit protocol of package txn needs no
// locks. HTTP handlers reach that state only through snapshots the
// loop publishes; interactive queries read committed state from Badger
// snapshots in their own goroutines, for the tasks the loop publishes as
// queryable (app_queryable.go).
type App struct {
	topo    *topology.Topology
	cfg     Config
	secOpts []kgo.Opt // Config.Security's client options
	log     *slog.Logger
	metrics *appMetrics
	thm     *threadMetrics // per stream thread (app_threads_metrics.go)
	// snapStore is the snapshot store, nil without one (app_snapshot.go).
	snapStore *changelog.SnapshotStore

	// Set up by Run.
	layout *layout
	db     *changelog.DB
	adm    *kadm.Client
	admCl  *kgo.Client

	// poison holds the bad records found so far, rejectAttempts the
	// rejections of input records' outputs, and isolate says the
	// transaction being redone after a rejection produces its outputs one
	// by one (app_errors.go, app_rejected.go). They outlive sessions; only
	// the loop goroutine touches them. A commit past a record, or its
	// partition leaving the thread that found it, forgets it.
	// With stream threads (app_threads.go) the registries are shared
	// under poisonMu, and isolate lives on each thread.
	poisonMu       sync.Mutex
	poison         map[recordKey]poisonEntry
	rejectAttempts map[recordKey]rejections

	purge *purger // repartition topic purging (app_purge.go)

	// threads are the record loops (WithThreads; app_threads.go); leases
	// keep a task's local state to one of them at a time.
	threads []*appThread
	leases  taskLeases
	// threadSums serialises the threads' updates of App-wide values
	// computed over every thread (readiness, the tasks, lag and paused
	// gauges; app_threads.go), so none stores a sum of stale reads last.
	threadSums sync.Mutex

	ready    atomic.Bool
	running  atomic.Bool   // while Run's clients are open: queries of a stopped App say so
	pub      published     // read by HTTP handlers
	peers    peerView      // the peer detector's, for GET /peers (app_peers.go)
	iq       queryRegistry // what queries may read; see app_queryable.go
	httpAddr atomic.Value  // string: the bound address
	ui       uiState       // the web view's samples (app_ui.go)

	// tenants: per-tenant outputs and staleness (app_tenants.go).
	tenants tenantAccounts
	// buckets are the rate-limited tenants' token buckets, which every
	// thread draws on (app_admit.go).
	buckets tenantBuckets

	hazard        atomic.Pointer[appHazard]    // set by Run (app_hazard.go)
	global        atomic.Pointer[globalStores] // set by Run before any task (app_global.go)
	globalMetrics *globalMetrics

	ha haRuntime // active tasks and standbys (standby.go)

	// pace throttles every restore, standby, snapshot load and snapshot
	// write of the App together, from one budget (app_pace.go).
	pace changelog.PaceFunc
}

// NewApp validates the configuration for topo. Nothing touches the network
// or the disk until Run, but for reading the files Config.Security names.
func NewApp(topo *topology.Topology, opts ...Option) (*App, error) {
	if topo == nil {
		return nil, errors.New("processor: NewApp: nil topology")
	}
	cfg, err := newConfig(opts)
	if err == nil {
		err = cfg.EnsureDefaults(topo.Application()).Validate()
	}
	if err == nil {
		err = checkOffsetMetaFits(topo, cfg.OffsetMetadataMaxBytes)
	}
	var secOpts []kgo.Opt
	if err == nil {
		secOpts, err = cfg.Security.ClientOpts()
	}
	if err != nil {
		return nil, fmt.Errorf("processor: app %q: %w", topo.Application(), err)
	}
	a := &App{
		topo:    topo,
		cfg:     cfg,
		secOpts: secOpts,
		log:     cfg.Logger.With("app", topo.Application()),
		metrics: newAppMetrics(topo.Application()),

		poison:         map[recordKey]poisonEntry{},
		rejectAttempts: map[recordKey]rejections{},
	}
	a.pub.frontiers = map[string]frontier.Frontier{}
	a.threads = newThreads(cfg.Threads)
	a.pace = changelog.SleepPacer(cfg.RestoreShare, a.hasRunningTasks)
	a.thm = newThreadMetrics(a.metrics.reg, topo.Application())
	a.purge = newPurger(a)
	a.ha.registerMetrics(a.metrics.reg, topo.Application())
	a.registerContactMetrics()
	if ops := topo.OrderNumberedState(); len(ops) > 0 {
		a.log.Warn("operators whose store or repartition topic name depends on declaration order: declaring another unnamed sibling of their kind before them renames their state; name them with topology.Named",
			"operators", ops)
	}
	return a, nil
}

// Config returns the validated configuration.
func (a *App) Config() Config { return a.cfg }

// HTTPAddr is the address the HTTP server listens on, once Run bound it.
func (a *App) HTTPAddr() string {
	s, _ := a.httpAddr.Load().(string)
	return s
}

// Ready reports whether every assigned task is restored and processing.
func (a *App) Ready() bool { return a.ready.Load() }

// Run sets up internal topics and local state, joins the group and
// processes until ctx is done, then commits what it has, closes its tasks
// and leaves the group. It returns nil after a clean shutdown. A fenced or
// unresolvable session is replaced by a new one without returning; any
// other failure (bad topology against the cluster, a task error) returns.
func (a *App) Run(ctx context.Context) error {
	// The HTTP address first: a taken port must fail the start before it
	// creates topics or writes the state directory.
	ln, err := a.listenHTTP()
	if err != nil {
		return err
	}
	return a.run(ctx, ln)
}

// run is Run with the HTTP listener listenHTTP bound (nil: no HTTP). The
// listener is served once the tasks can answer (startHTTP), closed if run
// returns before that.
func (a *App) run(ctx context.Context, ln net.Listener) (err error) {
	defer func() {
		if ln != nil {
			_ = ln.Close()
		}
	}()
	if err := a.setup(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // shut down before it started: nothing to commit
		}
		return err
	}
	defer a.admCl.Close()
	defer func() { _ = a.db.Close() }() // a rebuild replaces a.db
	a.running.Store(true)
	defer a.running.Store(false) // before the clients close
	// The failure hazard, and the running marker, while the state
	// directory is locked (app_hazard.go).
	if err := a.startHazard(time.Now()); err != nil {
		return err
	}
	hazardDone := make(chan struct{})
	go a.hazard.Load().keep(hazardDone)
	defer func() {
		close(hazardDone)
		failed := err
		if ctx.Err() != nil {
			failed = nil // shut down, whatever it was doing
		}
		a.hazard.Load().stop(failed)
	}()
	// Shut down while starting (a global store's restore can take a
	// while): nothing to commit, as when setup is interrupted.
	starting := func(err error) error {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := a.openSnapshots(ctx); err != nil {
		return starting(err)
	}
	defer a.closeSnapshots()
	// Global stores catch up with their topics before any task exists;
	// they close after g.Wait, when every task is closed.
	global, err := a.startGlobal(ctx)
	if err != nil {
		return starting(err)
	}
	a.global.Store(global)
	defer global.close()
	stopFrontier, err := a.startFrontier(ctx)
	if err != nil {
		return starting(err)
	}
	defer stopFrontier()
	a.removeFormerThreads(ctx)
	peers := a.peerBookBeforeJoin(ctx)
	g, gctx := errgroup.WithContext(ctx)
	srv := a.startHTTP(ln)
	ln = nil // srv's now: Shutdown closes it
	g.Go(func() error {
		// Handler may be mounted elsewhere, so /ui's samples are taken
		// whether or not Run serves HTTP itself: one look a second.
		a.runUISampler(gctx)
		return nil
	})
	g.Go(func() error {
		// Deletes repartition records below the committed offsets, off
		// the record loop; Run's shutdown cancels it and waits.
		a.purge.run(gctx, a.adm)
		return nil
	})
	if global != nil {
		g.Go(func() error { return global.keep(gctx) })
	}
	g.Go(func() error {
		a.runPeerWatch(gctx, peers)
		return nil
	})
	g.Go(func() error {
		// HTTP stays up until every thread has committed and left the
		// group: peers read a refused connection as this instance's
		// death (app_peers.go), and a removal before the leave would
		// turn a clean shutdown's last commit into an abort.
		defer func() {
			if srv != nil {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}
		}()
		stopWatch := a.watchLiveness()
		defer stopWatch()
		return a.runThreads(ctx, gctx)
	})
	err = g.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// loop runs sessions until ctx is done. A session ends on shutdown, on a
// failure it cannot recover in place (fenced, an unknown commit outcome, a
// broker outage or another transient Kafka error), or on a fatal error.
// Transient failures start a new session after a capped, jittered backoff,
// so the service rides through broker restarts by itself; only fatal
// errors (bad topology against the cluster, a processing error under the
// fail policy, corrupt input the app was told to stop on) end Run.
//
// With stream threads each thread runs its own loop (app_threads.go); a
// rebuild, which replaces the DB every thread shares, is then done by
// runThreads once every thread stopped.
func (a *App) loop(ctx context.Context, th *appThread) error {
	var backoff retry.Backoff
	defer th.turned.Store(0)
	for {
		th.alive()
		started := time.Now()
		s, err := a.newSession(ctx, th)
		if err == nil {
			err = s.run(ctx)
			if err != nil && !errors.Is(err, errRestartSession) {
				s.abandon()
			}
			memberID, _ := s.cl.GroupMetadata()
			s.close(sessionEnd(ctx, err))
			if cause, _ := restartCause(err); cause == "fenced" && ctx.Err() == nil {
				if terr := a.takenOverAfterFence(ctx, th, memberID); terr != nil {
					if th.fencedAgain(time.Now()) {
						err = terr
					} else {
						a.log.Warn("fenced, and the group lists another member with this instance id; joining again (a second fence soon after stops the app: instance ids must be unique)",
							"thread", th.index, "err", terr)
					}
				}
			}
		}
		if ctx.Err() != nil {
			if th.leave() {
				a.leaveGroup(th)
			}
			return nil
		}
		cause, restart := restartCause(err)
		if !restart {
			// The error stops the App: this thread's static member leaves
			// as the other threads' do on shutdown, so its partitions move
			// now rather than after the session timeout. Not when another
			// process holds the instance id: leaving would remove it.
			if !errors.Is(err, errInstanceTaken) && th.leave() {
				a.leaveGroup(th)
			}
			return err
		}
		if cause == "rebuild" {
			if len(a.threads) > 1 {
				return fmt.Errorf("%w: %w", errRebuildThreads, err)
			}
			if rerr := a.rebuildState(err); rerr != nil {
				return rerr
			}
		}
		a.hazard.Load().sessionFailed(cause)
		if time.Since(started) > time.Minute {
			backoff.Reset() // a session that ran a while starts the sequence over
		}
		wait := backoff.Next()
		a.log.Warn("restarting session", "thread", th.index, "cause", cause, "wait", wait.Round(time.Millisecond), "err", err)
		a.metrics.sessionRestarts.WithLabelValues(cause).Inc()
		if retry.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// sessionEnd is the state the tasks of a session that ended with err
// (nil on shutdown) are logged in as they close: fenced when another
// producer with the instance's transactional id took over, closed
// otherwise, with the reason: shutdown, the restart cause (restartCause),
// or error when err ends the App.
func sessionEnd(ctx context.Context, err error) (state string, attrs []any) {
	if ctx.Err() != nil {
		return taskClosed, []any{"reason", "shutdown"}
	}
	cause, restart := restartCause(err)
	switch {
	case cause == "fenced":
		return taskFenced, nil
	case restart:
		return taskClosed, []any{"reason", cause}
	case err == nil:
		return taskClosed, []any{"reason", "shutdown"}
	}
	return taskClosed, []any{"reason", "error"}
}

// restartCause classifies a session's end: whether a new session can
// recover from it, and why (a metric label).
func restartCause(err error) (cause string, restart bool) {
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, errFatal):
		return "", false
	case errors.Is(err, errCorruptState):
		return "rebuild", true
	case errors.Is(err, errTxnTimedOut):
		return "transaction_timeout", true
	case errors.Is(err, txn.ErrFenced):
		return "fenced", true
	case errors.Is(err, txn.ErrOutcomeUnknown):
		return "outcome_unknown", true
	case errors.Is(err, errRestartSession):
		return "restart", true
	case retry.Transient(err):
		return "transient", true
	}
	return "", false
}

// leaveGroup removes this static member from the group on shutdown, so its
// partitions move to the remaining instances now rather than after the
// session timeout (scale-down). Restarts for a new session do not leave.
func (a *App) leaveGroup(th *appThread) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := a.adm.LeaveGroup(ctx, kadm.LeaveGroup(a.topo.Application()).InstanceIDs(a.threadInstance(th)))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		a.log.Warn("leave group", "thread", th.index, "err", err)
	}
}

// errRestartSession is wrapped by session errors the App recovers from by
// closing every task and joining again with a new session.
var errRestartSession = errors.New("session must restart")

// errFatal is wrapped by errors no new session can fix, even when they
// wrap a transient-looking cause: a user processor's error under the fail
// policy, say, must stop the app and not be replayed forever.
var errFatal = errors.New("fatal")

// errInstanceTaken is wrapped, with errFatal, by the errors that say
// another process joined the group with this member's instance id: the
// member it names is no longer this one's, so stopping must not leave.
var errInstanceTaken = errors.New("instance id taken by another process")

func restartable(err error) bool {
	return errors.Is(err, txn.ErrFenced) || errors.Is(err, txn.ErrOutcomeUnknown)
}

// published is what the loop shares with HTTP handlers.
type published struct {
	mu        sync.RWMutex
	frontiers map[string]frontier.Frontier
	snapshot  frontier.Snapshot         // the stalest thread's controller (publishSnapshot)
	snapshots map[int]frontier.Snapshot // by thread (app_threads.go)
	owners    map[int32]memberInfo      // partition number -> owner, from the group
}

// errCorruptState is wrapped by session errors that mean the local state
// cannot be read (a damaged Badger table): the App moves the state aside
// and every task restores from its changelog in the next session.
var errCorruptState = errors.New("local state is corrupt")
