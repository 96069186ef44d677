package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// Standby replicas and warm-ups on the instance side.
//
// The group leader's assignment (standby_assign.go) gives this instance,
// besides its active partitions, partition numbers to keep as standbys
// and to warm up. For each stateful task of those partitions the session
// runs a standby: a goroutine that tails the task's changelog partitions,
// read_committed, into the task's own local DB (<StateDir>/tasks/<task>),
// with changelog.TaskState.Tail: a restore from the DB's applied offsets
// (with every rebuild check of the restore path), then one long-lived
// client that fetches continuously and applies each fetch as it arrives,
// so a standby applies exactly what a restore would (only committed
// changes, the input-position records that become the task's floor) and
// records its offsets in the DB after each fetch, as a restore does at its
// end. It never fences anyone and never waits for a pending transaction:
// the active owner's open transaction is read once it commits. A tail
// that fails (a broker outage, its position gone from the log) is retried
// a second later, with a new restore.
//
// When a standby's task becomes active here, the session stops the
// standby (and waits for its goroutine, which closes the task DB) before
// the active task opens the DB: one writer at a time. The active restore
// then starts from the standby's offsets and reads only the tail. A
// revocation of the standby, the session's end or the App's shutdown stop
// it the same way; its local state stays for whoever opens the task next.
//
// Each member reports its lags in its join metadata (haLags): 0 for the
// partitions whose stateful tasks all run here, the standby's last
// measured lag for those kept as standbys, the offsets left to restore
// for tasks restoring here (as Kafka Streams reports a restoring task's
// changelog offsets); local state of tasks this instance neither runs,
// restores nor keeps is not reported (the leader treats it as no state).

// WithStandbyReplicas sets Config.StandbyReplicas.
func WithStandbyReplicas(n int) Option { return func(c *Config) { c.StandbyReplicas = n } }

// WithAcceptableRecoveryLag sets Config.AcceptableRecoveryLag.
func WithAcceptableRecoveryLag(records int64) Option {
	return func(c *Config) { c.AcceptableRecoveryLag = records }
}

// WithMaxWarmupReplicas sets Config.MaxWarmupReplicas.
func WithMaxWarmupReplicas(n int) Option { return func(c *Config) { c.MaxWarmupReplicas = n } }

// WithProbingRebalanceInterval sets Config.ProbingRebalanceInterval.
func WithProbingRebalanceInterval(d time.Duration) Option {
	return func(c *Config) { c.ProbingRebalanceInterval = d }
}

// Defaults of the high-availability settings, Kafka Streams' own
// (acceptable.recovery.lag, max.warmup.replicas,
// probing.rebalance.interval.ms).
const (
	defaultAcceptableRecoveryLag    = 10_000
	defaultMaxWarmupReplicas        = 2
	defaultProbingRebalanceInterval = 10 * time.Minute
)

// warmupCheckInterval is how often the prober looks whether every warm-up
// caught up (syncProbe).
const warmupCheckInterval = 250 * time.Millisecond

func (c *Config) ensureStandbyDefaults() {
	if c.AcceptableRecoveryLag == 0 {
		c.AcceptableRecoveryLag = defaultAcceptableRecoveryLag
	}
	if c.MaxWarmupReplicas == 0 {
		c.MaxWarmupReplicas = defaultMaxWarmupReplicas
	}
	if c.ProbingRebalanceInterval == 0 {
		c.ProbingRebalanceInterval = defaultProbingRebalanceInterval
	}
}

func (c *Config) validateStandby() error {
	if c.StandbyReplicas < 0 {
		return fmt.Errorf("config: StandbyReplicas %d must be ≥ 0", c.StandbyReplicas)
	}
	if c.AcceptableRecoveryLag < 0 {
		return fmt.Errorf("config: AcceptableRecoveryLag %d must be ≥ 0 (0 takes the default %d)", c.AcceptableRecoveryLag, defaultAcceptableRecoveryLag)
	}
	if c.MaxWarmupReplicas < 0 {
		return fmt.Errorf("config: MaxWarmupReplicas %d must be ≥ 0 (0 takes the default %d)", c.MaxWarmupReplicas, defaultMaxWarmupReplicas)
	}
	if c.ProbingRebalanceInterval < 0 {
		return fmt.Errorf("config: ProbingRebalanceInterval %s must be positive (0 takes the default %s)", c.ProbingRebalanceInterval, defaultProbingRebalanceInterval)
	}
	return nil
}

// haRuntime is the App's view of its active tasks and standbys, shared by
// the loop, the standby goroutines, the group's join metadata (client
// goroutine) and the /tasks endpoint. It outlives sessions.
type haRuntime struct {
	mu     sync.Mutex
	active map[topology.TaskID]bool // every thread's (byThread's union)
	// byThread are the running active tasks of each stream thread.
	byThread map[int][]topology.TaskID
	standby  map[topology.TaskID]*standbyTask
	// restoring are the changelog offsets the restores of active tasks
	// have left, as last reported (setRestoring).
	restoring map[topology.TaskID]int64

	tasksGauge prometheus.Gauge
	lagGauge   *prometheus.GaugeVec
	// db is the App's state, for the metrics (a rebuild replaces it).
	db atomic.Pointer[changelog.DB]
}

func (h *haRuntime) registerMetrics(reg *prometheus.Registry, app string) {
	labels := prometheus.Labels{"app": app}
	h.tasksGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_standby_tasks",
		Help: "Standby tasks (warm-ups included) this instance keeps up to date from their changelogs.", ConstLabels: labels})
	h.lagGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_standby_lag_records",
		Help: "Changelog offsets a standby task is behind the last stable offsets, measured about every second.", ConstLabels: labels}, []string{"task"})
	clients := h.dbCounter(labels, "tidemark_changelog_clients_created_total",
		"Kafka clients created to restore and tail changelogs: per restore one or two, per standby tail one. "+
			"A steady climb while no task moves is client churn.",
		func(st changelog.DBStats) int64 { return st.KafkaClients })
	opens := h.dbCounter(labels, "tidemark_state_task_db_opens_total",
		"Badger opens of task DBs (reopens for a large restore included): one per task that starts here "+
			"without its DB open, none for a standby that becomes the task's active on its stream thread.",
		func(st changelog.DBStats) int64 { return st.TaskDBOpens })
	reg.MustRegister(h.tasksGauge, h.lagGauge, clients, opens)
}

// dbCounter is a counter read from the App's current state's DBStats.
func (h *haRuntime) dbCounter(labels prometheus.Labels, name, help string, of func(changelog.DBStats) int64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 {
		if db := h.db.Load(); db != nil {
			return float64(of(db.Stats()))
		}
		return 0
	})
}

// setActive records the running active tasks of stream thread th.
func (h *haRuntime) setActive(th int, ids []topology.TaskID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byThread == nil {
		h.byThread = map[int][]topology.TaskID{}
	}
	h.byThread[th] = ids
	h.active = map[topology.TaskID]bool{}
	for _, ids := range h.byThread {
		for _, id := range ids {
			h.active[id] = true
		}
	}
}

// isActive reports whether the task of id (topology.TaskID.String) runs
// as an active task on one of this process's threads.
func (h *haRuntime) isActive(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t := range h.active {
		if t.String() == id {
			return true
		}
	}
	return false
}

// setRestoring records that task id's restore has remaining offsets left.
func (h *haRuntime) setRestoring(id topology.TaskID, remaining int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.restoring == nil {
		h.restoring = map[topology.TaskID]int64{}
	}
	h.restoring[id] = remaining
}

// endRestoring forgets task id's restore: it runs now, or was stopped.
func (h *haRuntime) endRestoring(id topology.TaskID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.restoring, id)
}

// setStandbyGauge sets the standby gauge to the standbys of every stream
// thread.
func (h *haRuntime) setStandbyGauge() {
	h.mu.Lock()
	n := len(h.standby)
	h.mu.Unlock()
	h.tasksGauge.Set(float64(n))
}

// standbyTask is one standby's goroutine and what it measured.
type standbyTask struct {
	id topology.TaskID
	// warmup: kept to take over once caught up, rather than as one of
	// the StandbyReplicas. Only reported; a standby runs the same.
	warmup atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
	lag    atomic.Int64 // -1 until the tail's restore ends
}

// statefulTasks lists the tasks of partition number p with logged stores.
func (a *App) statefulTasks(p int32) []topology.TaskID {
	var ids []topology.TaskID
	for i, sub := range a.topo.SubTopologies() {
		if !slices.ContainsFunc(sub.Stores, func(s store.Spec) bool { return s.Logged }) {
			continue
		}
		if p < a.layout.tasks[i] {
			ids = append(ids, topology.TaskID{SubTopology: i, Partition: p})
		}
	}
	return ids
}

// maxPartitions is the largest task count of the sub-topologies.
func (a *App) maxPartitions() int32 {
	var n int32
	for _, c := range a.layout.tasks {
		n = max(n, c)
	}
	return n
}

// haLags is this member's report for its join metadata: per partition
// number whose stateful tasks all run here, restore here or are kept as
// standbys with a measured lag, the sum of their lags.
//
// A restoring task counts with what it has left: reported as no state,
// the leader would hand its partition to any member with a caught-up
// standby, however little the restore had left, and give this member a
// warm-up to take it back.
func (a *App) haLags() map[int32]int64 {
	a.ha.mu.Lock()
	defer a.ha.mu.Unlock()
	out := map[int32]int64{}
	for p := range a.maxPartitions() {
		ids := a.statefulTasks(p)
		if len(ids) == 0 {
			continue
		}
		var sum int64
		complete := true
		for _, id := range ids {
			if a.ha.active[id] {
				continue
			}
			if l, ok := a.ha.restoring[id]; ok {
				sum += l
				continue
			}
			st := a.ha.standby[id]
			if st == nil || st.lag.Load() < 0 {
				complete = false
				break
			}
			sum += st.lag.Load()
		}
		if complete {
			out[p] = sum
		}
	}
	return out
}

// changelogEnds lists the end offsets of every changelog partition and
// sums them per partition number over its stateful tasks (haConfig.ends).
// The group leader calls it as it assigns; nil when the listing fails,
// and a partition number any of whose changelogs is missing is left out.
func (a *App) changelogEnds() map[int32]int64 {
	app := a.topo.Application()
	var topics []string
	for _, sub := range a.topo.SubTopologies() {
		for _, spec := range sub.Stores {
			if spec.Logged {
				topics = append(topics, changelog.TopicName(app, spec.Name))
			}
		}
	}
	if len(topics) == 0 || a.adm == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		a.log.Warn("listing changelog end offsets for the assignment failed: members without state count as not caught up", "err", err)
		return nil
	}
	out := map[int32]int64{}
next:
	for p := range a.maxPartitions() {
		var sum int64
		for _, id := range a.statefulTasks(p) {
			for _, spec := range a.topo.SubTopologies()[id.SubTopology].Stores {
				if !spec.Logged {
					continue
				}
				o, ok := ends.Lookup(changelog.TopicName(app, spec.Name), p)
				if !ok {
					continue next
				}
				sum += o.Offset
			}
		}
		out[p] = sum
	}
	return out
}

// haConfig is the leader's assignment configuration.
func (a *App) haConfig() haConfig {
	return haConfig{
		standbys:   a.cfg.StandbyReplicas,
		acceptable: a.cfg.AcceptableRecoveryLag,
		maxWarmups: a.cfg.MaxWarmupReplicas,
		stateful:   func(p int32) bool { return len(a.statefulTasks(p)) > 0 },
		hot:        a.pinnedPartitions(),
	}
}

// standbySet is a session's standbys and the standby assignment it was
// last synced with.
type standbySet struct {
	want  standbyAssignment // under session.assignMu
	tasks map[topology.TaskID]*standbyTask
	// stopping are the done channels of standbys stopped but perhaps
	// still closing their state (stopStandby).
	stopping []chan struct{}
	probe    context.CancelFunc // the prober, while warm-ups exist
	// pending is the standby assignment of the sync being assigned
	// (onStandby), applied with its active partitions (onAssigned).
	pending *standbyAssignment
	// handedOver are the closed active tasks whose DBs are held open for
	// their standby here (handOverToStandby), until it opened them or
	// settleHandOvers let them go.
	handedOver map[topology.TaskID]bool
	// epoch counts the distinct standby assignments synced (synced is
	// the last); the prober forces at most one early rebalance per epoch.
	epoch  atomic.Int64
	synced standbyAssignment
}

// onStandby receives the standby assignment of a sync (client goroutine).
// It takes effect together with the sync's active partitions, when kgo
// calls onAssigned (after every sync, even one that adds nothing): a loop
// that saw the new standbys first stopped the standby of a task the same
// sync had just made active here, without handing its open DB over
// (changelog.DB.HandOver), and ~50 ms later the active task opened the
// DB again, waiting for the standby's close (a memtable flush: seconds
// under load) to do so.
func (s *session) onStandby(sa standbyAssignment) {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	s.standby.pending = &sa
}

// applyPendingStandby makes the standby assignment of the sync whose
// active partitions are being assigned the wanted one. The caller holds
// assignMu.
func (s *session) applyPendingStandby() {
	sa := s.standby.pending
	if sa == nil {
		return
	}
	s.standby.pending = nil
	if !slices.Equal(sa.Standby, s.standby.want.Standby) || !slices.Equal(sa.WarmUp, s.standby.want.WarmUp) {
		s.standby.want = *sa
		s.changed = true
	}
}

// syncStandbys stops the standbys no longer assigned and those whose task
// is now active here (want), before the caller opens the active tasks, and
// starts the newly assigned ones. It runs on the loop, in syncTasks.
func (s *session) syncStandbys(ctx context.Context, want map[topology.TaskID]bool) {
	s.assignMu.Lock()
	sa := s.standby.want
	s.assignMu.Unlock()
	warm := map[int32]bool{}
	for _, p := range sa.WarmUp {
		warm[p] = true
	}
	wanted := map[topology.TaskID]bool{}
	for _, p := range sa.all() {
		for _, id := range s.app.statefulTasks(p) {
			if !want[id] {
				wanted[id] = true
			}
		}
	}
	for id, st := range s.standby.tasks {
		if !wanted[id] {
			if want[id] {
				// Its active task opens here next: it takes the
				// standby's open DB over (changelog.DB.HandOver).
				s.app.db.HandOver(id.String())
			}
			s.stopStandby(st)
		} else {
			st.warmup.Store(warm[id.Partition])
		}
	}
	var started []string
	for id := range wanted {
		if _, ok := s.standby.tasks[id]; ok {
			continue
		}
		s.startStandby(ctx, id, warm[id.Partition])
		started = append(started, id.String())
	}
	s.settleHandOvers(want, false)
	s.app.ha.setStandbyGauge()
	if len(started) > 0 {
		sort.Strings(started)
		s.app.log.Info("standby tasks started", "tasks", started, "standbys", len(s.standby.tasks), "warmups", len(sa.WarmUp))
	}
	if !slices.Equal(sa.Standby, s.standby.synced.Standby) || !slices.Equal(sa.WarmUp, s.standby.synced.WarmUp) {
		s.standby.synced = sa
		s.standby.epoch.Add(1)
	}
	s.syncProbe(ctx, len(sa.WarmUp) > 0)
}

// standbyNext reports whether partition p is among this member's
// standbys or warm-ups in the standby assignment it is being synced with
// (pending), or else the one it runs.
func (s *session) standbyNext(p int32) bool {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	sa := &s.standby.want
	if s.standby.pending != nil {
		sa = s.standby.pending
	}
	return slices.Contains(sa.all(), p)
}

// handOverToStandby keeps the DB of active task id, which is being
// closed, open for the standby of the task that starts here next: a task
// moving to another member (a warm-up that caught up) leaves a standby on
// its previous owner, and closing and reopening the DB between the two
// flushed its memtable and started cold, on the member that still runs
// its other tasks (changelog.DB.HandOver).
func (s *session) handOverToStandby(id topology.TaskID) {
	s.app.db.HandOver(id.String())
	if s.standby.handedOver == nil {
		s.standby.handedOver = map[topology.TaskID]bool{}
	}
	s.standby.handedOver[id] = true
}

// settleHandOvers ends the hand-overs of closed active tasks
// (handOverToStandby) that no standby started here for, that did not
// become active again and, unless the session is closing (final), that
// the standby assignment being synced does not start a standby for: the
// loop can see a sync's revocations before kgo assigns its partitions,
// which applies its standby assignment (applyPendingStandby). Their DBs
// close. A standby that started takes its DB over when it opens the
// task's state; one stopped before that leaves it to the next sync's
// settle or to stopStandbys.
func (s *session) settleHandOvers(want map[topology.TaskID]bool, final bool) {
	for id := range s.standby.handedOver {
		if _, tailing := s.standby.tasks[id]; tailing {
			continue
		}
		if !final && !want[id] && s.standbyNext(id.Partition) {
			continue
		}
		if !want[id] {
			s.app.db.EndHandOver(id.String())
		}
		delete(s.standby.handedOver, id)
	}
}

// syncProbe runs the prober while this member warms up partitions: every
// ProbingRebalanceInterval it forces a rebalance, whose join metadata
// carries the warm-ups' current lags, so the leader moves the partitions
// whose warm-up caught up (KIP-441's probing rebalance). It also forces
// one as soon as every warm-up is caught up (lag at most
// AcceptableRecoveryLag), once per standby assignment: a restarted
// instance whose warm-ups resume from its own local state catches up in
// a second and should not wait out the interval (this member does not
// report local state it neither runs nor keeps, see haLags). The interval
// still probes for warm-ups that never all catch up at once.
func (s *session) syncProbe(ctx context.Context, on bool) {
	if !on {
		if s.standby.probe != nil {
			s.standby.probe()
			s.standby.probe = nil
		}
		return
	}
	if s.standby.probe != nil {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	s.standby.probe = cancel
	every, acceptable := s.app.cfg.ProbingRebalanceInterval, s.app.cfg.AcceptableRecoveryLag
	cl, epoch := s.cl, &s.standby.epoch
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		check := time.NewTicker(warmupCheckInterval)
		defer check.Stop()
		fired := int64(-1)
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				s.app.log.Info("probing rebalance: warm-up lags reported to the leader", "interval", every)
				cl.ForceRebalance()
			case <-check.C:
				if e := epoch.Load(); e != fired && s.app.warmupsCaughtUp(acceptable) {
					fired = e
					s.app.log.Info("warm-ups caught up: rebalancing for the leader to move their tasks")
					cl.ForceRebalance()
				}
			}
		}
	}()
}

// warmupsCaughtUp reports whether this instance has warm-ups and every
// one's last measured lag is at most acceptable.
func (a *App) warmupsCaughtUp(acceptable int64) bool {
	a.ha.mu.Lock()
	defer a.ha.mu.Unlock()
	n := 0
	for _, st := range a.ha.standby {
		if !st.warmup.Load() {
			continue
		}
		n++
		if l := st.lag.Load(); l < 0 || l > acceptable {
			return false
		}
	}
	return n > 0
}

// startStandby starts the standby goroutine of task id.
func (s *session) startStandby(ctx context.Context, id topology.TaskID, warmup bool) {
	sctx, cancel := context.WithCancel(ctx)
	st := &standbyTask{id: id, cancel: cancel, done: make(chan struct{})}
	st.warmup.Store(warmup)
	st.lag.Store(-1)
	s.standby.tasks[id] = st
	s.app.ha.mu.Lock()
	if s.app.ha.standby == nil {
		s.app.ha.standby = map[topology.TaskID]*standbyTask{}
	}
	s.app.ha.standby[id] = st
	s.app.ha.mu.Unlock()
	go func() {
		defer close(st.done)
		// A sibling stream thread may still hold the task's local state
		// (app_threads.go); the standby starts once it let go.
		release, err := s.app.leases.acquire(sctx, id, fmt.Sprintf("thread %d standby", s.th.index))
		if err != nil {
			return
		}
		defer release()
		s.runStandby(sctx, st)
		// Its lag gauge goes with it, unless a newer standby of the
		// task was started meanwhile (it waits for the lease, so it has
		// not set the gauge yet).
		s.app.ha.mu.Lock()
		if _, again := s.app.ha.standby[id]; !again {
			s.app.ha.lagGauge.DeleteLabelValues(id.String())
		}
		s.app.ha.mu.Unlock()
	}()
}

// stopStandby cancels a standby and forgets it without waiting for its
// goroutine: closing its task state took up to ~270 ms on the test
// broker, and when the task becomes active here the record loop (every
// other task) waited that long. Whatever opens the task's state next, its
// active task or a new standby, takes the task's lease (taskLeases), which
// the goroutine gives back only once the state is closed. The session's
// close waits for it (stopStandbys).
func (s *session) stopStandby(st *standbyTask) {
	st.cancel()
	delete(s.standby.tasks, st.id)
	s.standby.stopping = slices.DeleteFunc(s.standby.stopping, closed)
	s.standby.stopping = append(s.standby.stopping, st.done)
	s.app.ha.mu.Lock()
	if s.app.ha.standby[st.id] == st {
		delete(s.app.ha.standby, st.id)
	}
	s.app.ha.mu.Unlock()
	s.app.ha.setStandbyGauge()
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopStandbys stops every standby and the prober (the session's close),
// and waits for every standby goroutine, stopped now or before.
func (s *session) stopStandbys() {
	s.syncProbe(nil, false)
	for _, st := range s.standby.tasks {
		s.stopStandby(st)
	}
	for _, done := range s.standby.stopping {
		<-done
	}
	s.standby.stopping = nil
	s.settleHandOvers(nil, true)
}

// runStandby keeps task st.id's local state caught up with its changelogs
// until ctx ends. Failures (a broker outage, a topic not there yet) are
// logged and retried; a standby never ends the session.
func (s *session) runStandby(ctx context.Context, st *standbyTask) {
	a := s.app
	id := st.id
	log := a.log.With("task", id.String(), "standby", true)
	var lastErr string
	backoff := func(err error) bool {
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			log.Warn("standby: catch-up failed, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
			return true
		}
	}
	// A task without local state starts from its newest snapshot, as an
	// active task does (openLeased): without it a warm-up on an instance
	// that is new to the task (a scale-out, a replaced node) read the
	// task's changelogs from offset 0, and since a member without state is
	// never caught up, every such move went that way. A snapshot that
	// cannot be loaded leaves the changelogs to do it all.
	if err := s.loadSnapshot(ctx, id); err != nil && ctx.Err() == nil {
		log.Warn("standby: loading the task's snapshot failed, restoring from its changelogs", "err", err)
	}
	for ctx.Err() == nil {
		state := a.db.NewTaskState(changelog.TaskStateConfig{
			ID:        id.String(),
			AppID:     a.topo.Application(),
			Partition: id.Partition,
			Producer:  s.producer, // required to open logged stores; a standby never flushes
			Logger:    log,
		})
		err := s.tailStandby(ctx, state, st, log)
		if cerr := state.Close(); cerr != nil {
			log.Warn("standby: close task state", "err", cerr)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		// What the tail measured no longer holds: the next restore may
		// rebuild the task from offset 0 (its changelog recreated, its
		// position gone from the log). Unknown until that restore says.
		a.setStandbyLag(st, -1)
		if !backoff(err) {
			return
		}
	}
}

// tailStandby opens the logged stores of st's task on state and tails
// their changelogs (changelog.TaskState.Tail: a restore, then one
// long-lived read_committed client fetching continuously) until ctx ends
// (nil) or the tail fails.
func (s *session) tailStandby(ctx context.Context, state *changelog.TaskState, st *standbyTask, log *slog.Logger) error {
	a := s.app
	for _, spec := range a.topo.SubTopologies()[st.id.SubTopology].Stores {
		if !spec.Logged {
			continue
		}
		if _, err := state.Open(spec, st.id.Partition); err != nil {
			return fmt.Errorf("standby %s: %w", st.id, err)
		}
	}
	var counted int64
	err := state.Tail(ctx, changelog.TailOptions{
		RestoreOptions: changelog.RestoreOptions{
			ClientOpts: a.clientOpts(),
			Logger:     log,
			// Read to what is stable now: the active owner's open
			// transaction is read by the tail, once it commits.
			PendingTxnWait: -1,
			Pace:           a.pace,
			Progress:       a.standbyRestoreProgress(st),
		},
		OnTail: func(p changelog.TailProgress) {
			if p.Lag >= 0 {
				a.setStandbyLag(st, p.Lag)
			}
			n := p.Restored + p.Applied
			a.metrics.restoredRecords.Add(float64(n - counted))
			counted = n
		},
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("standby %s: %w", st.id, err)
	}
	return nil
}

// setStandbyLag records st's lag, -1 for unknown (haLags then reports no
// state for its partition).
func (a *App) setStandbyLag(st *standbyTask, lag int64) {
	st.lag.Store(lag)
	if a.ha.lagGauge == nil {
		return
	}
	if lag < 0 {
		a.ha.lagGauge.DeleteLabelValues(st.id.String())
		return
	}
	a.ha.lagGauge.WithLabelValues(st.id.String()).Set(float64(lag))
}

// standbyRestoreProgress is the Progress of the restore a standby's tail
// starts with: the lag is what the restore has left, as for an active
// task's restore (haLags), and, once it is done, what it had to read (an
// upper bound until the tail measures). Reporting only at the end left
// the lag the tail last measured in place for the whole restore: a
// standby whose tail failed and that was rebuilding its task from offset
// 0 still told the leader it was caught up.
func (a *App) standbyRestoreProgress(st *standbyTask) func(changelog.RestoreProgress) {
	return func(p changelog.RestoreProgress) {
		if p.Done {
			a.setStandbyLag(st, p.Total)
			return
		}
		a.setStandbyLag(st, p.Remaining)
	}
}

// tasksView is the body of GET /tasks.
type tasksView struct {
	Active  []string      `json:"active"`
	Standby []standbyView `json:"standby"`
	// Lags is what this instance reports to the group leader: partition
	// number -> changelog records behind (see haLags).
	Lags map[int32]int64 `json:"lags"`
	// Threads: with more than one stream thread, each thread's active
	// tasks, by thread number (app_threads.go).
	Threads map[string][]string `json:"threads,omitempty"`
}

type standbyView struct {
	Task   string `json:"task"`
	WarmUp bool   `json:"warmup"`
	// Lag is the changelog offsets behind at the last measurement (about
	// every second); -1 before the standby's first restore ended.
	Lag int64 `json:"lag"`
}

// serveTasks answers GET /tasks: the running active tasks, the standbys
// with their lags, and the lags reported to the leader.
func (a *App) serveTasks(w http.ResponseWriter, _ *http.Request) {
	v := tasksView{Active: []string{}, Standby: []standbyView{}}
	if a.layout != nil {
		v.Lags = a.haLags()
	}
	a.ha.mu.Lock()
	for id := range a.ha.active {
		v.Active = append(v.Active, id.String())
	}
	if len(a.threads) > 1 {
		v.Threads = map[string][]string{}
		for th, ids := range a.ha.byThread {
			names := make([]string, 0, len(ids))
			for _, id := range ids {
				names = append(names, id.String())
			}
			v.Threads[strconv.Itoa(th)] = names
		}
	}
	for id, st := range a.ha.standby {
		v.Standby = append(v.Standby, standbyView{Task: id.String(), WarmUp: st.warmup.Load(), Lag: st.lag.Load()})
	}
	a.ha.mu.Unlock()
	sort.Strings(v.Active)
	sort.Slice(v.Standby, func(i, j int) bool { return v.Standby[i].Task < v.Standby[j].Task })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
