package processor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/frontier/watch"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// The published output frontier.
//
// Every transaction writes, for each sink topic, this instance's record
// (key "<sink>@<instance>", frontier.Record) to the compacted, single
// partition "<app>-frontier" topic: the sink offsets it knows committed,
// the tasks that feed the sink (sub-topology × task count), and a mark per
// task it runs or ran: the task's output watermark (task.Task.OutputWatermarks,
// derived from the graph by topology.OutputBounds), with an idle flag. A
// reader (frontier.View, frontier/watch, GET /frontier) takes per task the
// greatest mark over all records and per sink the minimum over its tasks;
// a task no record mentions covers nothing.
//
// Marks never go back. Before its first transaction a session reads the
// topic to its end (read_committed) and publishes, per task, at least the
// greatest mark any record has for it (a task that moved keeps the mark its
// old owner published), and an instance keeps the marks of tasks it no
// longer runs in its record.
//
// Idle inputs. An input partition that is caught up and has had no record
// for the idle timeout is idle (idleTracker): it stops holding its task
// back. A task whose every input for a sink is idle is an idle task: it
// follows the minimum over the sink's active tasks, so an empty partition
// does not hold the whole sink at nothing, and when every task is idle the
// sink stays where it is. Records that later arrive on an idle input with
// timestamps at or below its task's published watermark are late: they are
// processed, but the frontier did not wait for them.
//
// Departed instances. The live member with the smallest instance id
// deletes the records of instances no longer in the group (a tombstone in
// its transaction), absorbing their offsets and marks into its own record
// in the same transaction, so every task they mention stays covered at
// least as far.

// Pacing of the frontier's background work and frontier-only commits.
const (
	frontierTickEvery    = 100 * time.Millisecond
	frontierRefreshEvery = time.Second      // frontier-only commits, at most
	frontierMembersEvery = 5 * time.Second  // group membership for cleanup
	frontierMembersStale = 20 * time.Second // older membership is not acted on
	frontierCleanupEvery = 10 * time.Second
)

// frontierIdleTimeout is how long a caught-up input partition goes without
// a record before it is idle (Config.IdleTimeout; negative: never idle).
func (a *App) frontierIdleTimeout() time.Duration { return a.cfg.IdleTimeout }

// frontierService is an App's share of the output frontier: the watcher
// that tails the frontier topic, what this instance committed, and the
// facts its background goroutine gathers (group members, end offsets of
// inputs). It outlives sessions.
type frontierService struct {
	app    *App
	bounds []topology.SubTopologyBounds
	// boundErr is why the output bounds could not be derived: nothing is
	// then ever claimed.
	boundErr error

	mu        sync.Mutex
	watcher   *watch.Watcher                         // nil: not published, or not started
	own       map[string]map[string]frontier.Record  // by thread instance id, then sink: what it committed
	members   map[string]bool                        // live instance ids
	membersAt time.Time                              // when members was read
	ends      map[changelog.TopicPartition]endOffset // last stable offsets probed
	wantEnds  map[string]bool                        // topics the loop wants probed

	// Each thread's session state is on its appThread (frontierState).

	ticked atomic.Bool // the loop calls frontierTick
}

type endOffset struct {
	off int64
	at  time.Time // when the request was sent
}

// sessionFrontier is a session's frontier state, owned by its loop.
type sessionFrontier struct {
	synced      bool            // the topic was read back
	idle        *idleTracker    // input partitions' idleness
	pending     *frontierTxn    // what the open transaction publishes
	cleanup     map[string]bool // departed records to absorb and delete
	lastTick    time.Time
	lastOnly    time.Time // last frontier-only commit
	lastCleanup time.Time
	warned      map[topology.TaskID]bool
}

// frontierTxn is what produceFrontier put in the open transaction.
type frontierTxn struct {
	records map[string]frontier.Record // by sink
	deleted []string                   // keys tombstoned
}

// frontierServices holds each App's frontierService, keyed by the App so
// that the frontier's state stays in this file (a field of App would serve
// as well). The entry is made on first use and removed by the stop
// function startFrontier returns.
var frontierServices sync.Map // *App → *frontierService

func (a *App) frontierService() *frontierService {
	if v, ok := frontierServices.Load(a); ok {
		return v.(*frontierService)
	}
	fs := &frontierService{app: a, own: map[string]map[string]frontier.Record{}, ends: map[changelog.TopicPartition]endOffset{}, wantEnds: map[string]bool{}}
	for i := range a.topo.SubTopologies() {
		b, err := a.topo.OutputBounds(i)
		if err != nil && fs.boundErr == nil {
			fs.boundErr = err
			a.log.Warn("output frontier: cannot derive output watermarks; nothing will be claimed covered", "err", err)
		}
		fs.bounds = append(fs.bounds, b)
	}
	v, _ := frontierServices.LoadOrStore(a, fs)
	return v.(*frontierService)
}

// startFrontier starts the frontier's background work once the topics are
// set up: the watcher tailing "<app>-frontier" (under exactly-once with
// PublishFrontier) and the goroutine that reads the group's members and
// the inputs' end offsets. stop ends both and waits for them; Run calls it
// before it returns.
func (a *App) startFrontier(ctx context.Context) (stop func(), err error) {
	fs := a.frontierService()
	var w *watch.Watcher
	if a.layout != nil && a.layout.frontier != "" {
		w, err = watch.New(a.cfg.Brokers, a.topo.Application(), watch.WithTopic(a.layout.frontier),
			watch.WithClientOpts(a.userClientOpts()...), watch.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("processor: frontier watcher: %w", err)
		}
	}
	fs.mu.Lock()
	fs.watcher = w
	fs.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fs.background(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if w != nil {
				w.Close()
			}
			frontierServices.Delete(a)
		})
	}
	return stop, nil
}

// background reads, on their cadences, the group's live members (for the
// cleanup of departed instances' records) and the last stable offsets of
// the input topics the loop asks about (for idleness). Results go to fs
// under fs.mu; the loop picks them up.
func (fs *frontierService) background(ctx context.Context) {
	a := fs.app
	probe := idleProbeEvery(a.frontierIdleTimeout())
	t := time.NewTicker(probe)
	defer t.Stop()
	var lastMembers time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if a.adm == nil {
			continue
		}
		fs.mu.Lock()
		topics := make([]string, 0, len(fs.wantEnds))
		for topic := range fs.wantEnds {
			topics = append(topics, topic)
		}
		published := fs.watcher != nil
		fs.mu.Unlock()
		if len(topics) > 0 {
			sort.Strings(topics)
			at := time.Now()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			lo, err := a.adm.ListCommittedOffsets(rctx, topics...)
			cancel()
			if err == nil {
				fs.mu.Lock()
				lo.Each(func(o kadm.ListedOffset) {
					if o.Err == nil && o.Partition >= 0 {
						fs.ends[changelog.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = endOffset{off: o.Offset, at: at}
					}
				})
				fs.mu.Unlock()
			}
		}
		if published && time.Since(lastMembers) >= frontierMembersEvery {
			lastMembers = time.Now()
			if m, err := fs.readMembers(ctx); err == nil {
				fs.mu.Lock()
				fs.members, fs.membersAt = m, lastMembers
				fs.mu.Unlock()
			}
		}
	}
}

func (fs *frontierService) readMembers(ctx context.Context) (map[string]bool, error) {
	a := fs.app
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gs, err := a.adm.DescribeGroups(rctx, a.topo.Application())
	if err != nil {
		return nil, err
	}
	if err := gs.Error(); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, g := range gs {
		for _, m := range g.Members {
			if m.InstanceID != nil {
				out[*m.InstanceID] = true
			}
		}
	}
	return out, nil
}

// frontierState returns the session's frontier state, new for a new
// session.
func (s *session) frontierState() (*frontierService, *sessionFrontier) {
	fs := s.app.frontierService()
	if s.th.fsess != s {
		s.th.fsess = s
		s.th.fss = &sessionFrontier{idle: newIdleTracker(s.app.frontierIdleTimeout()), cleanup: map[string]bool{},
			warned: map[topology.TaskID]bool{}}
	}
	return fs, s.th.fss
}

// readBack makes the session's first publication start from what the
// topic holds: the watcher reads it to its end (every transaction this
// instance's earlier sessions committed is complete: a new producer's
// initialisation waits for them), and this instance's own records join
// what it remembers.
func (s *session) readBack(ctx context.Context) error {
	fs, ss := s.frontierState()
	if ss.synced {
		return nil
	}
	fs.mu.Lock()
	w := fs.watcher
	fs.mu.Unlock()
	if w != nil {
		if err := w.Sync(ctx); err != nil {
			return fmt.Errorf("processor: read back the frontier topic: %w", err)
		}
		view, _ := w.View()
		fs.mu.Lock()
		for _, sink := range s.app.frontierSinks() {
			if r, ok := view.Record(string(FrontierKey(sink, s.instance))); ok && r.Sink == sink {
				base, had := fs.ownOf(s.instance)[sink]
				if !had {
					base = frontier.Record{Sink: sink}
				}
				base = base.Absorb(r)
				base.Feeds, base.Legacy = s.app.frontierFeeds(sink), nil
				fs.ownOf(s.instance)[sink] = base
			}
		}
		fs.mu.Unlock()
	}
	ss.synced = true
	return nil
}

// frontierTick is the record loop's frontier step, called once per loop
// iteration with no transaction in the middle of a commit: it samples the
// consumer's positions and the probed end offsets into the idle tracker,
// reads the topic back once per session, decides on the cleanup of
// departed instances' records, and commits a transaction of frontier
// records alone when what this instance would publish moved (an input went
// idle, an idle task can follow further, a departed record awaits
// cleanup) and no other commit is due to carry it.
func (s *session) frontierTick(ctx context.Context, now time.Time) error {
	fs, ss := s.frontierState()
	fs.ticked.Store(true)
	if now.Sub(ss.lastTick) < frontierTickEvery {
		return nil
	}
	ss.lastTick = now
	s.observeInputs(fs, ss, now)
	if s.app.layout == nil || s.app.layout.frontier == "" {
		return nil
	}
	if !ss.synced {
		rctx, cancel := context.WithTimeout(ctx, s.app.cfg.TransactionTimeout)
		err := s.readBack(rctx)
		cancel()
		if err != nil {
			s.app.log.Warn("frontier read back", "err", err)
			return nil // retried at the next tick; produceFrontier insists
		}
	}
	if now.Sub(ss.lastCleanup) >= frontierCleanupEvery {
		ss.lastCleanup = now
		s.planCleanup(ctx, fs, ss, now)
	}
	if s.dirty() || now.Sub(ss.lastOnly) < frontierRefreshEvery {
		return nil
	}
	if !s.frontierMoved(fs, ss, now) {
		return nil
	}
	ss.lastOnly = now
	return s.commit(ctx, "frontier")
}

// observeInputs feeds the idle tracker the consumer's positions of the
// assigned input partitions and the end offsets probed since, and tells
// the background goroutine which topics to probe next.
func (s *session) observeInputs(fs *frontierService, ss *sessionFrontier, now time.Time) {
	inputs := map[changelog.TopicPartition]bool{}
	for id, lt := range s.tasks {
		for _, topic := range lt.task.Topics() {
			inputs[changelog.TopicPartition{Topic: topic, Partition: id.Partition}] = true
		}
	}
	ss.idle.retain(func(tp changelog.TopicPartition) bool { return inputs[tp] })
	uncommitted, committed := s.processedOffsets(), s.cl.CommittedOffsets()
	for tp := range inputs {
		pos := int64(-1)
		if o, ok := committed[tp.Topic][tp.Partition]; ok {
			pos = o.Offset
		}
		if o, ok := uncommitted[tp.Topic][tp.Partition]; ok {
			pos = o.Offset
		}
		ss.idle.observePosition(tp, pos, now)
	}
	want := map[string]bool{}
	for _, tp := range ss.idle.wantEnds(now) {
		want[tp.Topic] = true
	}
	fs.mu.Lock()
	for tp := range inputs {
		if e, ok := fs.ends[tp]; ok {
			ss.idle.observeEnd(tp, e.off, e.at)
		}
	}
	fs.wantEnds = want
	fs.mu.Unlock()
}

// planCleanup picks the records of departed instances to absorb and delete
// in the next transaction, if this instance is the live member with the
// smallest id and the membership is fresh. The watcher reads the topic to
// its end first, so the departed records absorbed are their last ones.
func (s *session) planCleanup(ctx context.Context, fs *frontierService, ss *sessionFrontier, now time.Time) {
	self := s.instance
	fs.mu.Lock()
	w, members, at := fs.watcher, fs.members, fs.membersAt
	fs.mu.Unlock()
	if w == nil || members == nil || now.Sub(at) > frontierMembersStale || !members[self] {
		return
	}
	for id := range members {
		if id < self {
			return // not the cleaner
		}
	}
	view, _ := w.View()
	var departed []string
	for _, key := range view.Keys() {
		if _, inst, ok := splitFrontierKey(key); ok && inst != self && !members[inst] {
			departed = append(departed, key)
		}
	}
	if len(departed) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Sync(rctx); err != nil {
		return
	}
	for _, key := range departed {
		ss.cleanup[key] = true
	}
}

// frontierMoved reports whether the records this instance would publish
// now differ from what it committed: marks, idle flags or a cleanup.
func (s *session) frontierMoved(fs *frontierService, ss *sessionFrontier, now time.Time) bool {
	if len(ss.cleanup) > 0 {
		return true
	}
	next, _ := s.nextFrontier(fs, ss, now, false)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for sink, r := range next {
		old, ok := fs.ownOf(s.instance)[sink]
		if !ok || len(old.Tasks) != len(r.Tasks) {
			return true
		}
		for i := range r.Tasks {
			if r.Tasks[i] != old.Tasks[i] {
				return true
			}
		}
	}
	return false
}

// frontierSinks are the user sink topics (repartition topics are not
// published), sorted.
func (a *App) frontierSinks() []string {
	var out []string
	for _, sink := range a.topo.SinkTopics() {
		if !a.topo.IsRepartitionTopic(sink) {
			out = append(out, sink)
		}
	}
	return out
}

// frontierFeeds are the sub-topologies writing to sink, with their task
// counts.
func (a *App) frontierFeeds(sink string) []frontier.Feed {
	var out []frontier.Feed
	for _, st := range a.topo.SubTopologies() {
		if slices.Contains(st.SinkTopics, sink) && a.layout != nil && st.ID < len(a.layout.tasks) {
			out = append(out, frontier.Feed{SubTopology: int32(st.ID), Tasks: a.layout.tasks[st.ID]})
		}
	}
	return out
}

// nextFrontier computes this instance's records for the open transaction:
// its last committed record per sink, with the sink offsets of the
// transaction, the departed records it cleans up absorbed (withCleanup),
// and a fresh mark for every task it runs: the task's output watermark,
// followed for an idle task, and never below any published mark of the
// task. It returns the keys to tombstone.
func (s *session) nextFrontier(fs *frontierService, ss *sessionFrontier, now time.Time, withCleanup bool) (map[string]frontier.Record, []string) {
	a := s.app
	view, _, own := fs.view(s.instance)
	var deleted []string
	absorbed := map[string][]frontier.Record{}
	if withCleanup {
		for key := range ss.cleanup {
			if r, ok := view.Record(key); ok {
				absorbed[r.Sink] = append(absorbed[r.Sink], r)
			}
			deleted = append(deleted, key)
		}
		sort.Strings(deleted)
	}
	// Every task's watermarks, per sink.
	type taskWM struct {
		task frontier.TaskRef
		lt   *liveTask
		wm   task.OutputWatermark
	}
	perSink := map[string][]taskWM{}
	for _, id := range s.sortedTaskIDs() {
		lt := s.tasks[id]
		if fs.boundErr != nil || id.SubTopology >= len(fs.bounds) {
			continue
		}
		wms, err := lt.task.OutputWatermarks(fs.bounds[id.SubTopology], ss.idleFunc(id.Partition, now))
		if err != nil {
			if !ss.warned[id] {
				ss.warned[id] = true
				a.log.Warn("output frontier: no watermark for task", "task", id.String(), "err", err)
			}
			continue
		}
		for sink, wm := range wms {
			perSink[sink] = append(perSink[sink], taskWM{task: frontier.TaskRef{SubTopology: int32(id.SubTopology), Partition: id.Partition}, lt: lt, wm: wm})
		}
	}
	s.txn.mu.Lock()
	marks := make(map[changelog.TopicPartition]int64, len(s.txn.marks))
	for tp, off := range s.txn.marks {
		marks[tp] = off
	}
	s.txn.mu.Unlock()
	out := map[string]frontier.Record{}
	for _, sink := range a.frontierSinks() {
		rec, ok := own[sink]
		if !ok {
			rec = frontier.Record{Sink: sink}
		}
		rec.Legacy = nil
		rec.Feeds = a.frontierFeeds(sink)
		for _, r := range absorbed[sink] {
			rec = rec.Absorb(r)
		}
		st, _ := view.Sink(sink)
		n := int(a.layout.partitions[sink])
		offs := make([]int64, max(n, len(rec.Offsets)))
		for p := range offs {
			offs[p] = frontier.NoOffset
			if p < len(rec.Offsets) {
				offs[p] = rec.Offsets[p]
			}
			if p < len(st.Partitions) {
				offs[p] = max(offs[p], st.Partitions[p].Offset)
			}
			if off, ok := marks[changelog.TopicPartition{Topic: sink, Partition: int32(p)}]; ok {
				offs[p] = max(offs[p], off+1)
			}
		}
		rec.Offsets = offs
		// The greatest mark published for each task, by anyone.
		published := map[frontier.TaskRef]frontier.TaskMark{}
		for _, m := range st.Tasks {
			published[m.TaskRef] = m
		}
		for _, m := range rec.Tasks {
			if p, ok := published[m.TaskRef]; ok {
				m = p.Join(m)
			}
			published[m.TaskRef] = m
		}
		fresh := map[frontier.TaskRef]frontier.TaskMark{}
		var idle []taskWM
		for _, tw := range perSink[sink] {
			if tw.wm.Idle {
				idle = append(idle, tw)
				continue
			}
			m := frontier.TaskMark{TaskRef: tw.task, WatermarkMs: tw.wm.Ms}
			if p, ok := published[tw.task]; ok {
				m.WatermarkMs = max(m.WatermarkMs, p.WatermarkMs)
			}
			fresh[tw.task] = m
		}
		// Idle tasks follow the active ones: first mark them all idle, so
		// that none follows another's stale active mark.
		for _, tw := range idle {
			m := frontier.TaskMark{TaskRef: tw.task, WatermarkMs: tw.wm.Ms, Idle: true}
			if p, ok := published[tw.task]; ok {
				m.WatermarkMs = max(m.WatermarkMs, p.WatermarkMs)
			}
			fresh[tw.task] = m
		}
		for _, tw := range idle {
			if follow, ok := followTarget(rec.Feeds, tw.task, fresh, published); ok {
				m := fresh[tw.task]
				m.WatermarkMs = max(m.WatermarkMs, tw.lt.task.FollowingWatermark(fs.bounds[tw.task.SubTopology], sink, ss.idleFunc(tw.task.Partition, now), follow))
				fresh[tw.task] = m
			}
		}
		for _, m := range fresh {
			rec = rec.SetMark(m)
		}
		out[sink] = rec
	}
	return out, deleted
}

// followTarget is the watermark an idle task follows: the minimum over the
// sink's other tasks that are not idle, by this instance's fresh marks or
// else the greatest published ones. A task without any mark holds it at
// nothing; false when every other task is idle (the task then stays where
// its own inputs left it).
func followTarget(feeds []frontier.Feed, self frontier.TaskRef, fresh, published map[frontier.TaskRef]frontier.TaskMark) (int64, bool) {
	s, any := int64(math.MaxInt64), false
	for _, f := range feeds {
		for p := int32(0); p < f.Tasks; p++ {
			t := frontier.TaskRef{SubTopology: f.SubTopology, Partition: p}
			if t == self {
				continue
			}
			m, ok := fresh[t]
			if !ok {
				m, ok = published[t]
			}
			if !ok {
				return math.MinInt64, true
			}
			if !m.Idle {
				s, any = min(s, m.WatermarkMs), true
			}
		}
	}
	return s, any
}

// idleFunc says which input topics of the task on partition are idle.
func (ss *sessionFrontier) idleFunc(partition int32, now time.Time) func(string) bool {
	return func(topic string) bool {
		return ss.idle.idle(changelog.TopicPartition{Topic: topic, Partition: partition}, now)
	}
}

// produceFrontier adds this instance's frontier records (and the
// tombstones of departed instances' records it cleans up) to the open
// transaction, from the outputs participant's Prepare, once every output's
// offset is known. What it publishes becomes this instance's committed
// state only when the transaction commits (advanceFrontier).
func (s *session) produceFrontier(ctx context.Context) error {
	fs, ss := s.frontierState()
	ss.pending = nil
	topic := s.app.layout.frontier
	if topic != "" {
		if err := s.readBack(ctx); err != nil {
			return err
		}
	}
	recs, deleted := s.nextFrontier(fs, ss, s.now(), topic != "")
	ss.pending = &frontierTxn{records: recs, deleted: deleted}
	if topic == "" {
		return nil
	}
	var batch []*kgo.Record
	hdr := []kgo.RecordHeader{{Key: "instance", Value: []byte(s.instance)}}
	for _, sink := range s.app.frontierSinks() {
		v, err := recs[sink].MarshalBinary()
		if err != nil {
			return fmt.Errorf("encode frontier of %s: %w", sink, err)
		}
		batch = append(batch, &kgo.Record{Topic: topic, Partition: 0, Key: FrontierKey(sink, s.instance), Value: v, Headers: hdr})
	}
	for _, key := range deleted {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Headers: hdr})
	}
	if err := s.producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		return fmt.Errorf("produce frontier records: %w", err)
	}
	return nil
}

// advanceFrontier makes what the committed transaction published this
// instance's committed frontier, served by GET /frontier and the floor of
// its next records.
func (s *session) advanceFrontier() {
	fs, ss := s.frontierState()
	p := ss.pending
	ss.pending = nil
	if p == nil {
		return
	}
	fs.mu.Lock()
	own := fs.ownOf(s.instance)
	for sink, r := range p.records {
		own[sink] = r
	}
	fs.mu.Unlock()
	for _, key := range p.deleted {
		delete(ss.cleanup, key)
	}
}

// FrontierKey is the key of an instance's record for sink on the
// "<app>-frontier" topic: "<sink>@<instance>". Topic names and instance
// ids cannot contain '@'.
func FrontierKey(sink, instance string) []byte { return []byte(sink + "@" + instance) }

func splitFrontierKey(key string) (sink, instance string, ok bool) {
	i := strings.LastIndexByte(key, '@')
	if i < 0 {
		return "", "", false
	}
	return key[:i], key[i+1:], true
}

// frontierView is the application's frontier as this instance knows it:
// the topic as the watcher read it, with this instance's committed records
// (which the watcher may not have read yet).
// view is what the service knows of the application's frontier: the
// records its watcher read (empty before it read any), the watcher, and a
// copy of this instance's own committed records by sink.
//
// own is the records of the thread with instance id instance; every
// thread's with instance "" (allOwn).
func (fs *frontierService) view(instance string) (*frontier.View, *watch.Watcher, map[string]frontier.Record) {
	fs.mu.Lock()
	w := fs.watcher
	own := map[string]frontier.Record{}
	for k, r := range fs.own[instance] {
		own[k] = r
	}
	fs.mu.Unlock()
	view := frontier.NewView()
	if w != nil {
		view, _ = w.View()
	}
	return view, w, own
}

func (a *App) frontierView() (*frontier.View, *watch.Watcher, map[string]frontier.Record) {
	v, ok := frontierServices.Load(a)
	if !ok {
		return frontier.NewView(), nil, nil // not running
	}
	fs := v.(*frontierService)
	view, w, _ := fs.view("")
	own := fs.allOwn(view)
	return view, w, own
}

// ownOf is the committed records of the thread with instance id instance,
// by sink; fs.mu must be held.
func (fs *frontierService) ownOf(instance string) map[string]frontier.Record {
	own := fs.own[instance]
	if own == nil {
		own = map[string]frontier.Record{}
		fs.own[instance] = own
	}
	return own
}

// allOwn puts every thread's committed records into view (the watcher
// may not have read them yet) and returns the process's record per sink:
// the threads' records absorbed into one (each thread runs other tasks
// and writes other sink partitions).
func (fs *frontierService) allOwn(view *frontier.View) map[string]frontier.Record {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	instances := make([]string, 0, len(fs.own))
	for inst := range fs.own {
		instances = append(instances, inst)
	}
	sort.Strings(instances)
	out := map[string]frontier.Record{}
	for _, inst := range instances {
		for sink, r := range fs.own[inst] {
			view.Put(string(FrontierKey(sink, inst)), r)
			if base, ok := out[sink]; ok {
				out[sink] = base.Absorb(r)
			} else {
				out[sink] = r
			}
		}
	}
	return out
}
