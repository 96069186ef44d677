package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// App runs a topology as a member of a Kafka consumer group: the live
// service. Start as many instances with the same application id as you
// like; the group spreads the partitions over them, keeping partition p of
// co-partitioned topics on one instance.
//
// Inside an instance one goroutine (Run's) owns every task, the
// transactional session and the frontier controller: records are processed,
// committed and applied in one order, so the commit protocol of package txn
// needs no locks. HTTP handlers reach that state only through snapshots the
// loop publishes and through query requests the loop serves between
// batches.
type App struct {
	topo    *topology.Topology
	cfg     Config
	log     *slog.Logger
	metrics *appMetrics

	// Set up by Run.
	layout *layout
	db     *changelog.DB
	adm    *kadm.Client
	admCl  *kgo.Client

	ready    atomic.Bool
	pub      published    // read by HTTP handlers
	queries  chan *query  // served by the loop
	httpAddr atomic.Value // string: the bound address
}

// NewApp validates the configuration for topo. Nothing touches the network
// or the disk until Run.
func NewApp(topo *topology.Topology, opts ...Option) (*App, error) {
	if topo == nil {
		return nil, errors.New("processor: NewApp: nil topology")
	}
	var cfg Config
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.EnsureDefaults(topo.Application()); err != nil {
		return nil, fmt.Errorf("processor: app %q: %w", topo.Application(), err)
	}
	a := &App{
		topo:    topo,
		cfg:     cfg,
		log:     cfg.Logger.With("app", topo.Application()),
		metrics: newAppMetrics(topo.Application()),
		queries: make(chan *query),
	}
	a.pub.frontiers = map[string]frontier.Frontier{}
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
	if err := a.setup(ctx); err != nil {
		return err
	}
	defer a.admCl.Close()
	defer a.db.Close()
	g, gctx := errgroup.WithContext(ctx)
	srv, err := a.startHTTP()
	if err != nil {
		return err
	}
	if srv != nil {
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		})
	}
	g.Go(func() error {
		defer func() {
			if srv != nil {
				_ = srv.Close()
			}
		}()
		return a.loop(gctx)
	})
	err = g.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// loop runs sessions until ctx is done. A session ends on shutdown, on a
// failure it cannot recover in place (fenced, unknown commit outcome), or
// on a fatal error.
func (a *App) loop(ctx context.Context) error {
	for {
		s, err := a.newSession(ctx)
		if err != nil {
			return err
		}
		err = s.run(ctx)
		if err != nil && !errors.Is(err, errRestartSession) {
			s.abandon()
		}
		s.close()
		switch {
		case ctx.Err() != nil:
			a.leaveGroup()
			return nil
		case errors.Is(err, errRestartSession):
			a.log.Warn("restarting session", "err", err)
			a.metrics.sessionRestarts.Inc()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		default:
			return err
		}
	}
}

// leaveGroup removes this static member from the group on shutdown, so its
// partitions move to the remaining instances now rather than after the
// session timeout (scale-down). Restarts for a new session do not leave.
func (a *App) leaveGroup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := a.adm.LeaveGroup(ctx, kadm.LeaveGroup(a.topo.Application()).InstanceIDs(a.cfg.InstanceID))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		a.log.Warn("leave group", "err", err)
	}
}

// errRestartSession is wrapped by session errors the App recovers from by
// closing every task and joining again with a new session.
var errRestartSession = errors.New("session must restart")

func restartable(err error) bool {
	return errors.Is(err, txn.ErrFenced) || errors.Is(err, txn.ErrOutcomeUnknown)
}

// published is what the loop shares with HTTP handlers.
type published struct {
	mu        sync.RWMutex
	frontiers map[string]frontier.Frontier
	snapshot  frontier.Snapshot
	owners    map[int32]memberInfo // partition number -> owner, from the group
}
