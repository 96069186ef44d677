package processor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// session is one membership of the group with one transactional producer.
// It lives until shutdown, a fatal error, or a failure that needs a new
// producer (fencing, an unknown commit outcome).
type session struct {
	app       *App
	th        *appThread // the stream thread running the session (app_threads.go)
	instance  string     // its static group instance id
	ctx       context.Context
	cl        *kgo.Client
	gts       *kgo.GroupTransactSession // nil under at-least-once
	committer *txn.Committer
	producer  *kgo.Client // changelog and sink records go here
	ctrl      *frontier.Controller
	ckpt      *frontier.CheckpointScheduler
	ckptRun   checkpointRun // the checkpoint in flight (app_checkpoint.go)
	now       func() time.Time
	polled    time.Time // when the batch being processed was polled (app_arrival.go)
	// passStart is when the pass being run started; zero outside passes.
	// Outputs report it to the controller instead of reading the clock
	// once per output (2% of a count's CPU): the controller's clock only
	// moves forward, and the pass's end follows within milliseconds.
	passStart time.Time
	// promiseFn is s.promise, bound once: a method value made per output
	// is an allocation per output.
	promiseFn func(*kgo.Record, error)
	// inRec is the input record being processed by a pass, a field so
	// that handing it to the task (an interface call) does not allocate
	// one per record; nothing keeps it past processOne.
	inRec topology.InputRecord
	held  heldOutputs // what the tasks' record caches hold (app_flush.go)
	// registryWaits counts the redos of a schema registry outage
	// (app_registry.go).
	registryWaits int

	tasks   map[topology.TaskID]*liveTask
	byInput map[changelog.TopicPartition]*liveTask
	// restoring are the assigned tasks still restoring, off the loop
	// (app_restore.go); they join tasks once restored.
	restoring map[topology.TaskID]*restoringTask
	// standby are the standby tasks the group gave this instance
	// (standby.go).
	standby standbySet

	// Assignment changes recorded by the group callbacks (client
	// goroutines) and applied by the loop.
	assignMu sync.Mutex
	assigned map[string]map[int32]bool
	changed  bool
	revoked  bool
	// lost are the tasks of the partitions revoked since the loop last
	// synced its tasks: closed then even when the group gave their
	// partitions back meanwhile (another member may have committed to
	// them in between), so that they restore from their changelogs.
	lost map[topology.TaskID]bool
	// revokes counts revocations; txnRevokes is its value when the
	// records of the open transaction began (app_revoke_fence.go).
	revokes    uint64
	txnRevokes uint64

	txn  *txnState // the open transaction's (app_pipeline.go: a sealed one's moves to its flight)
	pipe pipeState // the transaction ending off the loop (app_pipeline.go)
	cur  current   // the record being processed, for Collect
	// began is when the latest transaction began (app_txn_timeout.go).
	began time.Time

	lastWall      time.Time
	watermark     int64
	windowsClosed int64 // sum of the tasks' WindowsClosed at the last observation
	frontiers     map[string]*frontier.Frontier

	// fair are the queued records of each task (app_fair.go); admission
	// is whether records are charged to tenant rates (app_admit.go).
	fair      *fairQueues
	admission bool
	snap      snapRunner // the snapshot goroutine (app_snapshot.go)
	stall     stallWatch // app_stall.go
	// rejoin is the join metadata's forced-rebalance counter and
	// orphansStop stops thread 0's check for orphaned partitions
	// (app_orphans.go).
	rejoin      rejoinCounter
	orphansStop func()
	// prep runs the fences and offset reads of assignment changes
	// (app_taskprep.go).
	prep prepRunner
}

// txnState is what the open transaction has produced.
type txnState struct {
	mu      sync.Mutex                         // promises run on client goroutines
	err     error                              // first produce error
	marks   map[changelog.TopicPartition]int64 // highest sink offset produced
	oldest  time.Time                          // oldest input time among outputs
	outputs int                                // sink records
	// oldestBySink is oldest per sink topic, for the web view's staleness.
	oldestBySink map[string]time.Time
	// byTenant is the outputs to user sinks per tenant (app_tenants.go).
	byTenant map[string]*tenantTxn
	// deadLettered counts the dead-letter records of the transaction and
	// undecodable those of them that did not decode, added to the metrics
	// when it commits: a redo after an abort replays them.
	deadLettered, undecodable int
	// rejected: the broker refused an output for good (see rejected).
	rejected bool
	// unknownTopic is the first output topic the broker said it does not
	// host (see topicGone).
	unknownTopic string
}

// sessionFetchMaxWait is how long the broker holds a record loop's fetch
// that has no data yet (kgo.FetchMaxWait; see newSession).
const sessionFetchMaxWait = 100 * time.Millisecond

func (a *App) newSession(ctx context.Context, th *appThread) (*session, error) {
	ctrl, err := frontier.NewController(*a.cfg.Commit)
	if err != nil {
		return nil, err
	}
	ckpt, err := frontier.NewCheckpointScheduler(a.cfg.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("processor: checkpoint options: %w", err)
	}
	// The failure hazard outlives the session (app_hazard.go).
	ctrl.UseHazard(a.hazard.Load().est)
	ckpt.UseHazard(a.hazard.Load().est)
	s := &session{
		app:      a,
		th:       th,
		instance: a.threadInstance(th),
		// Records of the open transaction are produced with a context
		// that shutdown does not cancel: kgo fails buffered records whose
		// context is done, which would turn the final commit of a
		// graceful shutdown into an abort. The transaction bounds them.
		ctx:       context.WithoutCancel(ctx),
		ctrl:      ctrl,
		ckpt:      ckpt,
		now:       time.Now,
		tasks:     map[topology.TaskID]*liveTask{},
		restoring: map[topology.TaskID]*restoringTask{},
		standby:   standbySet{tasks: map[topology.TaskID]*standbyTask{}},
		byInput:   map[changelog.TopicPartition]*liveTask{},
		assigned:  map[string]map[int32]bool{},
		watermark: math.MinInt64,
		frontiers: map[string]*frontier.Frontier{},
		fair:      newFairQueues(a.cfg.MaxRecordsPerTaskPass, a.cfg.PollRecords),
		admission: rateLimited(ctrl.Options()),
	}
	s.promiseFn = s.promise
	for _, sink := range a.topo.SinkTopics() {
		if a.topo.IsRepartitionTopic(sink) {
			continue
		}
		f := frontier.NewFrontier(sink, int(a.layout.partitions[sink]))
		s.frontiers[sink] = &f
	}
	s.txn = &txnState{}
	s.txn.reset()
	th.contact.reset(time.Now())
	group := a.topo.Application()
	opts := a.clientOpts(
		kgo.ConsumerGroup(group),
		// Static membership (KIP-345): a restarted instance takes its
		// partitions back at once, without a rebalance or waiting for
		// its dead predecessor's session to time out.
		kgo.InstanceID(s.instance),
		kgo.ConsumeTopics(a.topo.SourceTopics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // lag at the end of a transactional log (enqueueFetches)
		kgo.Balancers(&copartitionBalancer{info: memberInfo{Instance: a.cfg.InstanceID, HTTP: a.cfg.AdvertisedHTTP, Thread: th.index},
			ha: a.haConfig(), lags: a.haLags, ends: a.changelogEnds, onStandby: s.onStandby, onSync: s.onSync, rejoin: &s.rejoin}),
		kgo.SessionTimeout(a.cfg.SessionTimeout),
		kgo.RebalanceTimeout(a.cfg.RebalanceTimeout),
		kgo.WithHooks(&th.contact),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		// Under transactions v2 a transaction's first produce can be
		// turned away with CONCURRENT_TRANSACTIONS while the previous
		// commit's markers are still being written (routine on a broker
		// that just started, or under load). franz-go (v1.22.3) retries
		// such a batch only after a metadata refresh, which it allows
		// at most every MetadataMinAge (default 5s): the commit's flush
		// would stall for up to 5s. The broker meanwhile logs
		// OutOfOrderSequenceException for the batches franz-go had
		// pipelined behind it; they are resent in order, nothing is
		// lost. See integration/freshbroker_test.go.
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MaxBufferedRecords(100_000),
		// A partition resumed (its task restored, its tenant's tokens
		// back, its queue drained) is only fetched once the fetch in
		// flight returns, and a fetch with no data waits FetchMaxWait
		// (kgo's default 5s) at the broker: the resumed partition would
		// stall for up to that long. Kafka Streams' consumers wait 500ms.
		// A backlogged task resumes with half its queue bound left
		// (app_fair.go), which at 100ms mostly covers the wait; at 250ms
		// `bench sweep`'s count calibration ran about 10% slower. An
		// idle consumer pays ten empty fetches a second per broker.
		kgo.FetchMaxWait(sessionFetchMaxWait),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onRevoked),
	)
	var sess txn.Transactor
	switch a.cfg.Guarantee {
	case ExactlyOnce:
		opts = append(opts,
			kgo.TransactionalID(txn.TransactionalID(a.topo.Application(), s.instance)),
			kgo.TransactionTimeout(a.cfg.TransactionTimeout),
			kgo.RequireStableFetchOffsets(),
		)
		s.gts, err = kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return nil, fmt.Errorf("processor: transactional session: %w", err)
		}
		s.cl = s.gts.Client()
		// Initialise the producer id now, not at the first record: with
		// the stable transactional id this aborts whatever transaction a
		// crashed predecessor left open, which the group's stable offset
		// fetch (and every read_committed reader of our outputs) would
		// otherwise wait on until the transaction times out.
		pctx, cancel := context.WithTimeout(ctx, a.cfg.TransactionTimeout)
		_, _, err = s.cl.ProducerID(pctx)
		cancel()
		if err != nil {
			s.gts.Close()
			return nil, fmt.Errorf("processor: init transactional producer %s: %w", txn.TransactionalID(a.topo.Application(), s.instance), err)
		}
		sess = txn.NewGroupTransactor(s.gts, group)
	default:
		s.cl, err = kgo.NewClient(append(opts, kgo.DisableAutoCommit())...)
		if err != nil {
			return nil, fmt.Errorf("processor: client: %w", err)
		}
		sess = txn.NewAtLeastOnceTransactor(s.cl, group)
	}
	s.producer = s.cl
	th.client.Store(s.cl)
	if a.cfg.wrapTransactor != nil {
		sess = a.cfg.wrapTransactor(sess)
	}
	var copts []txn.CommitterOption
	if a.cfg.FaultHook != nil {
		copts = append(copts, txn.WithFaultHook(a.cfg.FaultHook))
	}
	s.committer = txn.NewCommitter(queuedOffsets{sess, s}, s.participants, copts...)
	if a.cfg.sessionHook != nil {
		a.cfg.sessionHook(s)
	}
	return s, nil
}

func (t *txnState) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err, t.oldest, t.outputs, t.deadLettered, t.undecodable, t.rejected, t.unknownTopic = nil, time.Time{}, 0, 0, 0, false, ""
	t.marks = map[changelog.TopicPartition]int64{}
	clear(t.oldestBySink)
	clear(t.byTenant)
}

// participants are the transaction's shares: every task, then the outputs
// (Apply runs in this order, so the frontier advances after the state).
func (s *session) participants() []txn.Participant {
	out := make([]txn.Participant, 0, len(s.tasks)+1)
	for _, id := range s.sortedTaskIDs() {
		out = append(out, s.tasks[id])
	}
	return append(out, outputs{s})
}

func (s *session) sortedTaskIDs() []topology.TaskID {
	ids := make([]topology.TaskID, 0, len(s.tasks))
	for id := range s.tasks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].SubTopology != ids[j].SubTopology {
			return ids[i].SubTopology < ids[j].SubTopology
		}
		return ids[i].Partition < ids[j].Partition
	})
	return ids
}

func (s *session) onAssigned(ctx context.Context, cl *kgo.Client, added map[string][]int32) {
	// Not fetched until their task has restored (app_restore.go).
	pauseAssigned(cl, added)
	s.assignMu.Lock()
	for t, ps := range added {
		if s.assigned[t] == nil {
			s.assigned[t] = map[int32]bool{}
		}
		for _, p := range ps {
			s.assigned[t][p] = true
		}
	}
	s.applyPendingStandby()
	s.changed = true
	s.assignMu.Unlock()
	if anyPartition(added) {
		// kgo fetches the committed offsets of the added partitions
		// once this returns. A member that died with a transaction open
		// leaves its offsets pending (UNSTABLE_OFFSET_COMMIT), and kgo
		// retries that fetch after a fixed second: in about one failover
		// in three on the test broker, the moved partitions' first
		// output came 1 s late. Ending such transactions first costs
		// this callback a few round trips (the record loop goes on).
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.fenceDeparted(fctx); err != nil {
			s.app.log.Warn("could not check for transactions of departed members", "err", err)
		}
	}
}

func (s *session) onRevoked(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if !anyPartition(lost) {
		// A cooperative rebalance that takes nothing from this member
		// (another member left or joined) ends its group session with
		// an empty revocation. Counted as one, it aborted the open
		// transaction of every task that stayed, and the survivor of a
		// failover redid ~100 ms of work on the partitions it kept just
		// as the moved ones arrived. kgo's own session lets such a
		// transaction commit too (under the new generation).
		return
	}
	s.revoke(lost)
}

// onSync revokes what a sync's assignment no longer holds. kgo's
// GroupTransactSession calls the revoke callback only for the first
// revocation before its next End and swallows later ones: a rebalance
// that took more partitions while the first one's transaction was still
// open would leave their tasks running here next to their new owner.
// A revocation kgo does pass on right after is counted again, which only
// matches kgo: its session aborts the next transaction too.
func (s *session) onSync(synced map[string][]int32) {
	// kgo's group goroutine can sync before newSession has stored the
	// client (s.cl, unsynchronised: a nil dereference in CI); the
	// thread's atomic copy is nil until then, and that first member id
	// goes unremembered (a fence then restarts the session, as before).
	if cl := s.th.client.Load(); cl != nil {
		if id, _ := cl.GroupMetadata(); id != "" {
			s.th.rememberMember(id)
		}
	}
	s.assignMu.Lock()
	lost := map[string][]int32{}
	for t, ps := range s.assigned {
		for p := range ps {
			if !slices.Contains(synced[t], p) {
				lost[t] = append(lost[t], p)
			}
		}
	}
	s.assignMu.Unlock()
	if anyPartition(lost) {
		s.revoke(lost)
	}
}

// revoke forgets the lost partitions and counts a revocation, which
// aborts the open transaction (app_revoke_fence.go).
func (s *session) revoke(lost map[string][]int32) {
	s.queryRevoked(lost)
	s.fair.revoke(lost)
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	for t, ps := range lost {
		for _, p := range ps {
			delete(s.assigned[t], p)
		}
	}
	s.changed, s.revoked = true, true
	s.revokes++
	for topic, ps := range lost {
		sub, ok := s.app.topo.SubTopologyOf(topic)
		if !ok {
			continue
		}
		if s.lost == nil {
			s.lost = map[topology.TaskID]bool{}
		}
		for _, p := range ps {
			s.lost[topology.TaskID{SubTopology: sub, Partition: p}] = true
		}
	}
}

// wantedTasks derives the tasks of the current assignment, and the tasks
// revoked since the last call (lost), which may be among them again.
func (s *session) wantedTasks() (want, lost map[topology.TaskID]bool, changed bool) {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	if !s.changed {
		return nil, nil, false
	}
	s.changed = false
	lost, s.lost = s.lost, nil
	want = map[topology.TaskID]bool{}
	for topic, ps := range s.assigned {
		sub, ok := s.app.topo.SubTopologyOf(topic)
		if !ok {
			continue
		}
		for p := range ps {
			want[topology.TaskID{SubTopology: sub, Partition: p}] = true
		}
	}
	return want, lost, true
}

// anyPartition reports whether m names at least one partition.
func anyPartition(m map[string][]int32) bool {
	for _, ps := range m {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}

func (s *session) takeRevoked() bool {
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	r := s.revoked
	s.revoked = false
	return r
}

// syncTasks opens tasks for new assignments and closes revoked ones. It
// runs with no transaction open.
func (s *session) syncTasks(ctx context.Context) error {
	want, lost, changed := s.wantedTasks()
	if !changed {
		return nil
	}
	syncStart := time.Now()
	// A task revoked and assigned back before this sync is closed all the
	// same and restored: another member may have owned it and committed in
	// between, and its state here predates that.
	s.closeRegained(want, lost)
	s.queryAssigned(want)
	s.app.forgetPoison(s.th.index, s.inputsOf(want))
	for id, lt := range s.tasks {
		if !want[id] {
			if s.standbyNext(id.Partition) {
				s.handOverToStandby(id)
			}
			if err := lt.close(); err != nil {
				s.app.log.Warn("close revoked task", "task", id.String(), "err", err)
			}
			delete(s.tasks, id)
			s.app.metrics.forgetTask(id.String())
			s.taskState(id, taskRevoked)
		}
	}
	for id, rt := range s.restoring {
		if !want[id] {
			s.stopRestore(id, rt)
			delete(s.restoring, id)
			s.app.metrics.forgetTask(id.String())
			s.taskState(id, taskRevoked, "during", "restore")
		}
	}
	s.app.setReady(s.th, false)
	// Partitions moved: a member may have left with a transaction open.
	// End it now rather than when the broker times it out: it holds back
	// the outputs of every member and the restores below. With the new
	// tasks' committed metadata, off the loop (app_taskprep.go).
	var added []topology.TaskID
	for id := range want {
		_, running := s.tasks[id]
		_, restoring := s.restoring[id]
		if !running && !restoring {
			added = append(added, id)
		}
	}
	// Only the added tasks' offsets: the others' are pending in this
	// member's own open transaction as often as not, and a fetch of them
	// waits (UNSTABLE_OFFSET_COMMIT) for nothing it needs.
	addedSet := map[topology.TaskID]bool{}
	for _, id := range added {
		addedSet[id] = true
	}
	parts := s.inputsOf(addedSet)
	prep := s.prepareTasks(ctx, parts)
	// Standbys of tasks now active here stop before those open their DBs.
	standbyStart := time.Now()
	s.syncStandbys(ctx, want)
	standbyTook := time.Since(standbyStart)
	for _, id := range added {
		s.taskState(id, taskAssigned)
		// Opened and restored on its own goroutine once prep is done;
		// the loop promotes it to running once restored
		// (promoteRestored).
		s.startRestore(ctx, id, prep)
	}
	s.index()
	s.resumeRunning()
	s.app.setReady(s.th, len(s.restoring) == 0)
	s.app.setThreadTasks(s.th, len(s.tasks))
	s.app.ha.setActive(s.th.index, s.sortedTaskIDs())
	// How long the record loop spent on the change, for the other tasks'
	// sake (the fence and the new tasks' offsets run on prep's goroutine
	// and log at debug as "tasks prepared").
	s.app.log.Info("tasks assigned", "tasks", len(s.tasks)+len(s.restoring), "restoring", len(s.restoring),
		"took", time.Since(syncStart).Round(time.Millisecond), "standbys", standbyTook.Round(time.Millisecond))
	return nil
}

// inputsOf lists the input partitions of the tasks ids.
func (s *session) inputsOf(ids map[topology.TaskID]bool) txn.Partitions {
	parts := txn.Partitions{}
	subs := s.app.topo.SubTopologies()
	for id := range ids {
		for _, topic := range subs[id.SubTopology].SourceTopics {
			parts[topic] = append(parts[topic], id.Partition)
		}
	}
	return parts
}

func (s *session) index() {
	clear(s.byInput)
	for id, lt := range s.tasks {
		tps := make([]changelog.TopicPartition, 0, len(lt.task.Topics()))
		for _, topic := range lt.task.Topics() {
			tp := changelog.TopicPartition{Topic: topic, Partition: id.Partition}
			s.byInput[tp] = lt
			tps = append(tps, tp)
		}
		s.fair.expect(id, tps)
	}
}

// resetTasks recreates the task cores after an abort: the inputs rewind to
// the committed offsets, so in-memory processor state must rewind too:
// the clocks to what the last commit stored, punctuation schedules afresh.
// Stores stay open on their changelog.TaskState, whose Badger state is exactly
// the committed one.
func (s *session) resetTasks() error {
	s.fair.discard()
	s.dropStaged()
	for id, lt := range s.tasks {
		lt.state.Discard()
		_ = lt.task.Close()
		t, err := task.New(task.Params{
			Topology: s.app.topo, SubTopology: id.SubTopology, Partition: id.Partition,
			Stores: lt.state, Output: s, PartitionCount: s.app.layout.partitionCount,
			WallClock: s.now().UnixMilli(), Resume: lt.resume.clocks,
			GlobalStores: s.app.global.Load().taskStores(),
		})
		if err != nil {
			return fmt.Errorf("reset task %s after abort: %w", id, err)
		}
		lt.task = t
		// The consumer rewinds to the group's committed offsets, which
		// may be behind the state (stale offsets, app_reflected.go): the
		// floor, forgotten once the loop passed it, holds again. Without
		// it an abort after the skip counted the skipped inputs a second
		// time (make soak, broker-kill: 6,746 counts over on 446 keys).
		pos, found, err := lt.state.Position()
		if err != nil {
			return fmt.Errorf("reset task %s after abort: %w", id, err)
		}
		if found {
			lt.floor = pos
		}
	}
	s.index()
	s.watermark, s.windowsClosed = math.MinInt64, 0
	s.held = heldOutputs{}
	return nil
}

// close closes the session's tasks, logging each one's end state (see
// sessionEnd), and its client.
func (s *session) close(state string, attrs []any) {
	if s.orphansStop != nil {
		s.orphansStop()
	}
	s.drainFlight()
	s.collectCheckpoint(true)
	s.stopSnapshots()
	s.queryWithdraw()
	s.exportDropped(s.th.droppedRecords(), s.now())
	s.flushDropped(s.th.droppedRecords(), s.now())
	s.stopRestores(state, attrs)
	s.stopPreps()
	s.stopStandbys()
	for _, id := range s.sortedTaskIDs() {
		if err := s.tasks[id].close(); err != nil {
			s.app.log.Warn("close task", "task", id.String(), "err", err)
		}
		s.taskState(id, state, attrs...)
	}
	s.tasks = map[topology.TaskID]*liveTask{}
	s.app.ha.setActive(s.th.index, nil)
	s.app.setThreadTasks(s.th, 0)
	s.app.setThreadPaused(s.th, 0) // the client and its pauses go
	s.app.setReady(s.th, false)
	s.th.client.Store(nil)
	s.th.commitTotals.add(s.ctrl.Snapshot())
	if s.gts != nil {
		s.gts.Close()
	} else {
		s.cl.Close()
	}
}

// run is the record loop.
func (s *session) run(ctx context.Context) error {
	var wake time.Time
	if s.th.index == 0 && s.orphansStop == nil {
		octx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.watchOrphans(octx, func() {
				s.rejoin.n.Add(1)
				s.cl.ForceRebalance()
			})
		}()
		s.orphansStop = func() { cancel(); <-done }
	}
	for {
		s.th.alive()
		if ctx.Err() != nil {
			return s.shutdown()
		}
		if err := s.pipelineTurn(ctx); err != nil {
			return err
		}
		if !s.staging() && s.takeRevoked() {
			// The session aborts a transaction that spans a revocation;
			// end it now so the rewind and task changes happen together.
			if err := s.endRevoked(ctx); err != nil {
				return err
			}
		}
		if !s.committer.Open() && !s.staging() {
			s.fair.dropRevoked()
			if err := s.syncTasks(ctx); err != nil {
				return err
			}
		}
		if !s.staging() {
			if err := s.promoteRestored(ctx); err != nil {
				return err
			}
		}
		s.applyPauses()
		wait := time.Until(wake)
		wait = s.pollWait(min(max(wait, time.Millisecond), 50*time.Millisecond))
		// With records queued for the next pass the poll only takes what
		// the client has buffered: a nil context does not wait.
		var pctx context.Context
		cancel := func() {}
		if wait > 0 {
			pctx, cancel = context.WithTimeout(ctx, wait)
		}
		var fs kgo.Fetches
		polled := true
		switch {
		case s.staging():
			// kgo: no poll while End runs; the pass takes the queued
			// records (pipelineTurn waited if there were none).
			polled = false
		case s.gts != nil:
			fs = s.gts.PollRecords(pctx, s.app.cfg.PollRecords)
		default:
			fs = s.cl.PollRecords(pctx, s.app.cfg.PollRecords)
		}
		cancel()
		if polled {
			s.fair.polled = s.now()
		}
		if err := s.pollError(fs); err != nil {
			return err
		}
		if n := fs.NumRecords(); n > 0 || s.fair.busy() {
			if n > 0 {
				if err := s.syncTasks(ctx); err != nil { // tasks for partitions assigned during the poll
					return err
				}
			}
			if err := s.processBatch(ctx, fs, n); err != nil {
				if err := s.redo(ctx, err); err != nil {
					return err
				}
				continue
			}
			s.registryWaits = 0
		} else if s.fair.settling() {
			s.observeQueues(s.now()) // app_lag.go: the gauge would keep the unsettled lag
		}
		if err := s.punctuate(); err != nil {
			if err := s.redo(ctx, err); err != nil {
				return err
			}
			continue
		}
		s.exportDropped(s.th.droppedRecords(), s.now())
		if err := s.frontierTick(ctx, s.now()); err != nil {
			return err
		}
		now := s.now()
		d := s.ctrl.Tick(now)
		wake = d.Wake
		s.app.metrics.observeDecision(d)
		s.app.thm.interval.WithLabelValues(strconv.Itoa(s.th.index)).Set(d.Interval.Seconds())
		if d.Commit && s.dirty() {
			if err := s.commit(ctx, d.Reason.String()); err != nil {
				return err
			}
		}
		if cw := s.tickCheckpoint(ctx, now); !cw.IsZero() && cw.Before(wake) {
			wake = cw
		}
		s.watchStall(now)
	}
}

// redo handles the errors that call for redoing the open transaction: a
// bad record found (errReplay: the redo skips it) or an output rejected
// (errRedo: the redo comes after a pause). It aborts, rewinding inputs and
// tasks to the last commit. Other errors are returned as they are.
func (s *session) redo(ctx context.Context, err error) error {
	if !errors.Is(err, errReplay) && !errors.Is(err, errRedo) {
		return err
	}
	// With a transaction in flight the redo waits for it: if it aborted,
	// everything since the last commit is already rewound; if it
	// committed, the transaction after it is aborted here.
	aborted, serr := s.settleFlight(ctx, waitBlocked)
	if serr != nil {
		return serr
	}
	if !aborted {
		if err := s.begin(); err != nil {
			return err
		}
		if aerr := s.abort(ctx, abortRedo); aerr != nil {
			return aerr
		}
	}
	switch {
	case errors.Is(err, errRegistryWait):
		_ = retry.Sleep(ctx, s.registryPause(err))
	case errors.Is(err, errRedo):
		_ = retry.Sleep(ctx, s.redoPause())
	}
	return nil
}

func (s *session) pollError(fs kgo.Fetches) error {
	var fatal error
	fs.EachError(func(t string, p int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = err
		case errors.Is(err, kerr.FencedInstanceID):
			fatal = s.instanceFenced(err)
		default:
			// franz-go retries what is retriable; what reaches us here is
			// worth a log line but not a stop (e.g. a topic being deleted).
			s.app.log.Warn("fetch", "topic", t, "partition", p, "err", err)
		}
	})
	return fatal
}

func (s *session) dirty() bool {
	if s.committer.Open() || s.staging() {
		return true
	}
	for _, lt := range s.tasks {
		if lt.state.Pending() > 0 {
			return true
		}
	}
	return false
}

func (s *session) begin() error {
	if s.committer.Open() || s.staging() {
		return nil // staging: N+1 begins once N settles (app_pipeline.go)
	}
	if err := s.committer.Begin(); err != nil {
		return fmt.Errorf("%w: begin: %v", errRestartSession, err)
	}
	s.began = s.now()
	s.txn.reset()
	return nil
}

// processBatch queues a poll's n records by task and runs one pass over
// the queues (app_fair.go): at most Config.MaxRecordsPerTaskPass records
// of each task.
func (s *session) processBatch(ctx context.Context, fs kgo.Fetches, n int) error {
	start := s.now()
	if n > 0 {
		queued, err := s.enqueueFetches(fs, start)
		if err != nil {
			return err
		}
		if queued > 0 {
			s.ctrl.ObserveArrivals(start, queued)
		}
	}
	s.releaseHolds(start)
	if !s.runnable() {
		s.observeQueues(start)
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	s.passStart = start
	k, err := s.processPass(ctx)
	s.passStart = time.Time{}
	if err != nil {
		return err
	}
	end := s.now()
	s.observeQueues(end)
	if k == 0 {
		return nil
	}
	s.ctrl.ObserveProcessed(end, k, end.Sub(start))
	s.app.metrics.recordsIn.Add(float64(k))
	s.app.metrics.processing.Observe(end.Sub(start).Seconds() / float64(k))
	s.observeWatermark(end)
	return nil
}

// processOne runs one record. A record found bad earlier (the poison
// registry) is skipped or dead-lettered instead. A user function's error
// or panic goes to the processing-error handler, a source's decode failure
// to OnDeserializationError, a damaged store read to a rebuild.
func (s *session) processOne(ctx context.Context, lt *liveTask, in *topology.InputRecord, raw *kgo.Record) (err error) {
	key := recordKey{in.Topic, in.Partition, in.Offset}
	s.cur = current{lt: lt, raw: raw}
	defer func() { s.cur = current{} }()
	s.held.observe(s)
	s.app.poisonMu.Lock()
	pe, ok := s.app.poison[key]
	s.app.poisonMu.Unlock()
	if ok {
		if pe.action == DeadLetter {
			return s.deadLetter(ctx, raw, pe.kind, pe.operator, pe.cause)
		}
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = s.processingFailed(lt, raw, fmt.Errorf("task %s panicked on %s: %v\n%s", lt.task.ID(), key, p, debug.Stack()))
		}
	}()
	perr := lt.task.Process(in)
	switch {
	case perr == nil:
		s.observeHeld(lt)
		return nil
	case errors.Is(perr, errReplay), errors.Is(perr, errRedo), errors.Is(perr, errFatal):
		return perr // from Collect: a rejected output
	case errors.Is(perr, serde.ErrRegistry):
		// A serde's schema registry could not answer (a redo after a
		// pause) or refused: the record was not judged, so no handler
		// may skip or dead-letter it.
		if err := registryOutage(perr); err != nil {
			return err
		}
		return fmt.Errorf("processor: %w: %w", errFatal, perr)
	case errors.Is(perr, changelog.ErrGlobalCorrupt):
		// Rebuilding the task's state would not repair a global store
		// that tasks share: stop, and the next start's verification
		// reloads it from its topic.
		return fmt.Errorf("processor: %w: task %s: %w (restart the app: the store is verified when it opens and reloaded from its topic)",
			errFatal, lt.task.ID(), perr)
	case changelog.IsCorrupt(perr):
		return fmt.Errorf("%w: task %s: %v", errCorruptState, lt.task.ID(), perr)
	}
	if pe, ok := errors.AsType[*task.PunctuationError](perr); ok {
		// The record was processed in full; a stream-time punctuator it
		// made due failed. Blamed on the record, Continue skipped it and
		// redid the transaction, whose redo fired the punctuator again
		// on the next record: every record was skipped.
		s.observeHeld(lt)
		return s.punctuationFailed(pe)
	}
	switch {
	case errors.Is(perr, topology.ErrDeserialize):
		// Only a source's decode failure is a bad input record: a store
		// value or a windowed key that does not decode (serde.ErrDecode
		// from further down) is corrupt state or a bug. Nothing was
		// processed yet, so dead-lettering needs no replay. Its count
		// waits for the commit (acknowledge), as the dead letter does.
		if s.app.cfg.OnDeserializationError == DeadLetterOnDeserializationError {
			return s.deadLetter(ctx, raw, "deserialization", "", perr)
		}
		s.app.metrics.deserializationErrors.Inc()
		return fmt.Errorf("processor: %w: %w", errFatal, perr)
	}
	return s.processingFailed(lt, raw, perr)
}

// punctuationFailed asks the processing-error handler about a punctuation
// whose punctuator failed (returned an error or panicked), with no record
// in the context (ErrorContext.Punctuation). Fail stops the application;
// Continue and DeadLetter (there is no input record to dead-letter) go
// on: what the punctuator did before failing stands, as in Kafka Streams,
// and it fires again when it is next due.
func (s *session) punctuationFailed(pe *task.PunctuationError) error {
	ectx := ErrorContext{Task: pe.Task, Offset: -1, Timestamp: time.UnixMilli(pe.At), Attempts: 1, Punctuation: true}
	action, err := s.askProcessingHandler(ectx, pe)
	if action == Fail {
		return err
	}
	s.app.log.Warn("a punctuator failed; continuing", "action", action.String(), "task", pe.Task.String(),
		"type", pe.Type.String(), "at", pe.At, "thread", s.th.index, "err", pe.Err)
	return nil
}

// processingFailed asks the processing-error handler about a record whose
// processing failed part-way. Unless it says Fail, the record is
// registered as poison and the transaction redone without it: state
// changes and outputs it made before failing must not commit.
func (s *session) processingFailed(lt *liveTask, raw *kgo.Record, cause error) error {
	ectx := errorContextOf(lt.task.ID(), raw, cause, 1)
	action, err := s.askProcessingHandler(ectx, cause)
	if action == Fail {
		return err
	}
	return s.poison(ectx, action, "processing", cause)
}

// askProcessingHandler asks the processing-error handler (Fail without
// one) and counts its answer; with Fail it also returns the fatal error.
func (s *session) askProcessingHandler(ectx ErrorContext, cause error) (ErrorAction, error) {
	action := Fail
	if h := s.app.cfg.OnProcessingError; h != nil {
		action = h(ectx, cause)
	}
	s.app.metrics.processingErrors.WithLabelValues(action.String()).Inc()
	if action == Fail {
		return Fail, fmt.Errorf("processor: %w: %w", errFatal, cause)
	}
	return action, nil
}

// poison registers the decision for a bad record and asks for a replay.
func (s *session) poison(ectx ErrorContext, action ErrorAction, kind string, cause error) error {
	key := recordKey{ectx.Topic, ectx.Partition, ectx.Offset}
	if action == DeadLetter && s.app.cfg.DeadLetterTopic == "" {
		return fmt.Errorf("processor: %w: the %s error handler chose dead-letter for %s but no DeadLetterTopic is configured: %w", errFatal, kind, key, cause)
	}
	s.app.log.Warn("skipping a record", "kind", kind, "action", action.String(), "task", ectx.Task.String(),
		"record", key.String(), "operator", ectx.Operator, "err", cause)
	s.app.poisonMu.Lock()
	defer s.app.poisonMu.Unlock()
	s.app.poison[key] = poisonEntry{action: action, cause: cause, operator: ectx.Operator, kind: kind, thread: s.th.index}
	return errReplay
}

func errorContextOf(id topology.TaskID, raw *kgo.Record, cause error, attempts int) ErrorContext {
	ectx := ErrorContext{Task: id, Topic: raw.Topic, Partition: raw.Partition, Offset: raw.Offset,
		Timestamp: raw.Timestamp, Key: raw.Key, Value: raw.Value, Headers: headersOf(raw), Attempts: attempts}
	if oe, ok := errors.AsType[interface {
		error
		OperatorName() string
	}](cause); ok {
		ectx.Operator = oe.OperatorName()
	}
	return ectx
}

// current is the input record a task is processing, for the outputs it
// collects.
type current struct {
	lt  *liveTask
	raw *kgo.Record
}

func headersOf(r *kgo.Record) []topology.Header {
	if len(r.Headers) == 0 {
		return nil
	}
	hs := make([]topology.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = topology.Header{Key: h.Key, Value: h.Value}
	}
	return hs
}

// Collect is the tasks' Collector: it produces a sink record into the open
// transaction. The record's slices are copied (kgo keeps them until acked).
func (s *session) Collect(id topology.TaskID, rec *topology.OutputRecord) error {
	if err := s.begin(); err != nil {
		return err
	}
	p := rec.Partition
	if p < 0 {
		n, err := s.app.layout.partitionCount(rec.Topic)
		if err != nil {
			return err
		}
		p = task.DefaultPartition(rec.Key, n)
		if rec.Key == nil {
			// A null key has no partition of its own: spread such records
			// by task, as a producer spreads them, rather than all on
			// partition 0; deterministic, so a redo writes the same.
			p = id.Partition % n
		}
	}
	r := &kgo.Record{Topic: rec.Topic, Partition: p, Timestamp: time.UnixMilli(rec.Timestamp)}
	r.Key, r.Value = cloneKeyValue(rec.Key, rec.Value)
	for _, h := range rec.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	inputTime := time.UnixMilli(rec.Timestamp)
	s.txn.mu.Lock()
	s.txn.outputs++
	if s.txn.oldest.IsZero() || inputTime.Before(s.txn.oldest) {
		s.txn.oldest = inputTime
	}
	if o, ok := s.txn.oldestBySink[rec.Topic]; !ok || inputTime.Before(o) {
		if s.txn.oldestBySink == nil {
			s.txn.oldestBySink = map[string]time.Time{}
		}
		s.txn.oldestBySink[rec.Topic] = inputTime
	}
	if !s.app.topo.IsRepartitionTopic(rec.Topic) {
		s.txn.addTenantOutput(rec.Tenant, inputTime)
	}
	s.txn.mu.Unlock()
	if !s.held.flushing { // a held update was observed when held (observeHeld)
		now := s.passStart
		if now.IsZero() {
			now = s.now()
		}
		s.ctrl.ObserveOutput(now, rec.Tenant, s.arrival(), 1)
	}
	return s.produceOutput(r, false)
}

// cloneKeyValue copies an output's key and value (kgo keeps them until the
// record is acknowledged; the sinks reuse their buffers) into one
// allocation. nil stays nil and empty stays empty: a null key or value and
// an empty one are different things to Kafka.
func cloneKeyValue(k, v []byte) ([]byte, []byte) {
	buf := make([]byte, len(k)+len(v))
	var kc, vc []byte
	if k != nil {
		kc = buf[:len(k):len(k)]
		copy(kc, k)
	}
	if v != nil {
		vc = buf[len(k):]
		copy(vc, v)
	}
	return kc, vc
}

func (s *session) promise(r *kgo.Record, err error) {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err != nil {
		if s.txn.err == nil {
			s.txn.err = fmt.Errorf("produce to %s/%d: %w", r.Topic, r.Partition, err)
		}
		if rejected(err) {
			s.txn.rejected = true
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) && s.txn.unknownTopic == "" {
			s.txn.unknownTopic = r.Topic
		}
		return
	}
	tp := changelog.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	s.txn.marks[tp] = max(s.txn.marks[tp], r.Offset)
}

// observeWatermark feeds the controller the task watermark (the minimum
// over tasks that have seen input) when it advances, with the number of
// final window results emitted since the last call: pending finals are
// what a watermark-aligned early commit is for.
func (s *session) observeWatermark(now time.Time) {
	wm := int64(math.MaxInt64)
	var closed int64
	for _, lt := range s.tasks {
		if w := lt.task.Watermark(); w != math.MinInt64 && w < wm {
			wm = w
		}
		closed += lt.task.WindowsClosed()
	}
	closes := int(max(0, closed-s.windowsClosed))
	s.windowsClosed = closed
	if wm == math.MaxInt64 || (wm <= s.watermark && closes == 0) {
		return
	}
	s.watermark = max(s.watermark, wm)
	s.ctrl.ObserveWatermark(now, time.UnixMilli(s.watermark), closes)
}

// punctuate moves every task's wall clock, at most every 10ms.
func (s *session) punctuate() error {
	now := s.now()
	if now.Sub(s.lastWall) < 10*time.Millisecond {
		return nil
	}
	s.lastWall = now
	for _, id := range s.sortedTaskIDs() {
		if err := s.punctuateTask(s.tasks[id], now.UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// punctuateTask runs a task's due wall-clock punctuators. A punctuator's
// error or panic goes to the processing-error handler (punctuationFailed);
// a panic anywhere else in the call stops the application, naming the task.
func (s *session) punctuateTask(lt *liveTask, now int64) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("processor: %w: task %s panicked in a wall-clock punctuator at %d: %v\n%s", errFatal, lt.task.ID(), now, p, debug.Stack())
		}
	}()
	perr := lt.task.Punctuate(now)
	s.observeHeld(lt)
	if err := registryOutage(perr); err != nil {
		return err
	}
	if pe, ok := errors.AsType[*task.PunctuationError](perr); ok && !errors.Is(perr, errRedo) && !errors.Is(perr, errFatal) &&
		!errors.Is(perr, errReplay) && !changelog.IsCorrupt(perr) {
		return s.punctuationFailed(pe)
	}
	return taskCallError(lt, perr)
}
