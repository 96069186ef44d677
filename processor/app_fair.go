package processor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// Fair scheduling of tasks in the record loop (issue #15).
//
// Polled records are queued per task and input partition. Each pass of the
// record loop takes at most Config.MaxRecordsPerTaskPass records from each
// task's queue, in the task's timestamp order across its partitions, and
// leaves the rest for the next pass; between passes the loop punctuates,
// ticks the frontier controller and commits when it says so. A task with a
// backlog (a hot tenant's partition) then delays the other tasks by one
// pass, not by its whole backlog: their outputs commit while it works
// through it.
//
// Queued records are fetched but not processed, so they must not count as
// consumed: every commit caps each partition's offset at its queue head
// (txn.WithOffsetLimit), and so does the input position the state's
// changelogs record (stagePositions), which decides what a restore treats
// as already reflected. Whenever the consumer rewinds to the committed
// offsets (an abort: a redo, a rebalance mid-transaction; a new session)
// the queues are discarded, and a revoked partition's queue is dropped, since
// the consumer fetches those records again from there. A task whose queue
// grows past a bound (queueBound records or queueByteBound bytes) has its
// partitions' fetching paused (kgo PauseFetchPartitions; the client drops
// what it buffered for them and fetches it again on resume) until the queue
// has drained to half of it, so memory stays bounded by tasks × bound plus
// one poll.
//
// Admission control (app_admit.go) holds partitions in the same queues.

// DefaultMaxRecordsPerTaskPass is Config.MaxRecordsPerTaskPass's default. At
// the typical few to tens of microseconds per record, 500 records are a
// pass of a few milliseconds per task: well below the commit intervals the
// frontier controller chooses (5ms … 5s), so a backlogged task delays the
// others' commits by no more than a commit interval, while a pass still
// amortises the loop's per-pass work (poll, controller tick) over hundreds
// of records.
const DefaultMaxRecordsPerTaskPass = 500

// UnlimitedRecordsPerTaskPass as Config.MaxRecordsPerTaskPass turns fair
// scheduling off: each pass processes everything polled, task after task,
// as before fair scheduling. A backlogged task then holds back every other
// task's outputs and commits until the backlog is processed.
const UnlimitedRecordsPerTaskPass = -1

// WithMaxRecordsPerTaskPass sets Config.MaxRecordsPerTaskPass: the most records
// of one task a pass of the record loop processes before it moves on to
// the next task (and, after the last one, to punctuation and the commit
// decision). n ≥ 1, or UnlimitedRecordsPerTaskPass; NewApp rejects other
// values. Default DefaultMaxRecordsPerTaskPass.
func WithMaxRecordsPerTaskPass(n int) Option {
	return func(c *Config) { c.MaxRecordsPerTaskPass = n }
}

// checkMaxRecordsPerTaskPass validates Config.MaxRecordsPerTaskPass after defaults.
func checkMaxRecordsPerTaskPass(n int) error {
	if n < 1 && n != UnlimitedRecordsPerTaskPass {
		return fmt.Errorf("config: MaxRecordsPerTaskPass %d must be ≥ 1, or UnlimitedRecordsPerTaskPass (%d)", n, UnlimitedRecordsPerTaskPass)
	}
	return nil
}

// queueBound is the queued records of one task above which its partitions'
// fetching is paused: four passes' worth, and at least four polls. 0: no
// bound (fairness off; a pass empties every queue).
//
// The bound must hold more than one fetch of the task's partitions, or a
// backlogged task pauses at every fetch. A fetch brings up to
// FetchMaxPartitionBytes (1 MiB) per partition, tens of thousands of small
// records. Each pause drops what the client buffered for the partition, so
// it is fetched twice. A resume then waits for the fetch in flight, and when
// that fetch holds only caught-up partitions the broker keeps it FetchMaxWait.
// With a bound of one poll (10,000 records), a backlogged count application
// spent a third of its time waiting for polls and ran at half speed
// (`bench sweep`'s count calibration, runs alternated on one broker:
// 152-162k records/s, against 303-320k with this bound and a 100 ms
// FetchMaxWait).
func queueBound(perPass, pollRecords int) int {
	if perPass < 1 {
		return 0
	}
	return max(4*perPass, 4*pollRecords)
}

// queueByteBound is the queued key, value and header bytes of one task
// above which its partitions' fetching is paused, whatever the record
// count: with large records queueBound alone would let a task queue
// gigabytes. 16 MiB is several fetches of a partition even for records that
// compress well.
const queueByteBound = 16 << 20

// recordBytes is r's key, value and header bytes.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// partQueue is one input partition's fetched records not yet processed, in
// offset order.
type partQueue struct {
	tp   changelog.TopicPartition
	recs []*kgo.Record
	// behind is the partition's records after its last fetched one, as of
	// that fetch (its last stable offset minus the next offset; control
	// records count as fetched, see enqueueFetches).
	behind int64
	// known: a fetch of the partition reached the loop since its task
	// started or its queue was discarded, so behind is its lag; until
	// then its lag is unknown (since when: unknownSince) and its task
	// waits for it (taskQueue.next).
	known        bool
	unknownSince time.Time
	// fetched is when the loop polled the partition's last records
	// (app_lag.go).
	fetched time.Time
	// next is the offset after the last record (control records too)
	// fetched of the partition, when nextKnown: how far a fetch that
	// passes the partition on with no records got (fetchPosition).
	next      int64
	nextKnown bool
	// stable is the partition's stable offset as of its last fetch
	// (stableOffset).
	stable int64
	hold   admitHold // app_admit.go
	// throttled is when admission control last held the partition,
	// released when it last let it go (app_admit.go).
	throttled, released time.Time
	// polls are when the queued records were fetched: one mark per
	// enqueued batch, its last offset and its poll time, so a record
	// processed passes later still reports when it reached the process
	// (session.arrival), not when the pass ran.
	polls []pollMark
}

// pollMark is the poll time of a partition's records up to offset last.
type pollMark struct {
	last int64
	at   time.Time
}

// polledAt returns when the record at offset was polled and forgets the
// marks of batches before it.
func (p *partQueue) polledAt(offset int64) time.Time {
	for len(p.polls) > 1 && p.polls[0].last < offset {
		p.polls = p.polls[1:]
	}
	if len(p.polls) == 0 {
		return time.Time{}
	}
	return p.polls[0].at
}

// origin is the staleness origin of the record at offset for the commit
// controller (session.arrival): when it was polled, or when admission
// control last released the partition if that came later. A record that
// waited in a held partition waited by the user's choice (the tenant's
// Rate), which no commit interval changes. Counted from its poll, the
// controller's observed p99 read 1.6–4 s during a tenant's 10× burst
// throttled to 12,000 records/s (bench tenants), while commits took
// 10–20 ms: its feedback loop shortened every tenant's interval for a
// wait it cannot shorten, and a tenant's staleness target would ask for
// early commits for it.
func (p *partQueue) origin(offset int64) time.Time {
	polled := p.polledAt(offset)
	if p.released.After(polled) {
		return p.released
	}
	return polled
}

// head is the partition's next record; nil when its queue is empty.
func (p *partQueue) head() *kgo.Record {
	if len(p.recs) == 0 {
		return nil
	}
	return p.recs[0]
}

// taskQueue is one task's partition queues.
type taskQueue struct {
	id     topology.TaskID
	parts  []*partQueue // in the order the partitions were first fetched
	queued int
	// bytes are the queued records' recordBytes.
	bytes int
	// full: the queue passed a bound (records or bytes) and the task's
	// fetching is paused until it drains to half of both.
	full bool
}

// next picks the partition whose head record the task processes next: the
// lowest timestamp among the heads of its partitions, the earliest-fetched
// partition on a tie, the way Kafka Streams picks the head record with the
// lowest timestamp: the inputs of a join then meet in event-time order
// instead of one partition's batch after another's. Each partition's own
// (offset) order is kept. nil when no record may go, which includes that
// partition being held by admission control: the task waits for it rather
// than process its other partitions' later records first. (It skipped
// over a held head: the other inputs' stream time then closed the held
// records' windows, and a windowed operator dropped the rate-limited
// tenant's records as late once they were released.)
//
// The task also waits, as Kafka Streams does (KIP-695, max.task.idle.ms 0),
// while one of its partitions has nothing queued but has records on the
// broker it has not fetched yet, or has not been fetched at all since the
// task started (for at most unknownLagWait): its next records may be older
// than every queued head. Taking the other partitions' records meanwhile
// ran one input ahead of the other whenever the inputs had a backlog (a
// start after downtime): a partition's fetch brings at most
// FetchMaxPartitionBytes, so a small input was done while a large one was
// still fetched batch by batch, and windows downstream closed on the small
// one's stream time and dropped the large one's records as late.
func (q *taskQueue) next(now time.Time) *partQueue {
	best := q.lowest()
	if best == nil || best.hold.held() {
		return nil
	}
	for _, p := range q.parts {
		if len(p.recs) == 0 && p.lagging(now) {
			return nil
		}
	}
	return best
}

// lowest is the partition whose head record has the lowest timestamp, the
// earliest-fetched one on a tie; nil when nothing is queued.
func (q *taskQueue) lowest() *partQueue {
	var best *partQueue
	for _, p := range q.parts {
		h := p.head()
		if h == nil {
			continue
		}
		if best == nil || h.Timestamp.Before(best.head().Timestamp) {
			best = p
		}
	}
	return best
}

// heldBack reports whether the task waits for a partition admission
// control holds (taskQueue.next): it waits by the user's choice, not for
// a fetch.
func (q *taskQueue) heldBack() bool {
	best := q.lowest()
	return best != nil && best.hold.held()
}

// unknownLagWait bounds how long a task waits for a partition whose lag is
// unknown: the fetches of a partition with nothing to read seldom reach
// the loop (franz-go passes on an empty partition only beside another
// partition's records), so an idle input would otherwise hold its task
// back for good. Kafka Streams' consumer learns the lag from the first
// fetch response, empty or not, which takes up to its fetch.max.wait.ms:
// 500 ms by default.
const unknownLagWait = 500 * time.Millisecond

// lagging reports whether p, with nothing queued, may still have records
// the broker holds and the loop has not fetched: its last fetch left
// some behind (until settleBehind gives up on them), or no fetch of it
// has reached the loop yet, for up to unknownLagWait.
func (p *partQueue) lagging(now time.Time) bool {
	if p.known {
		return p.behind > 0
	}
	if p.unknownSince.IsZero() {
		p.unknownSince = now
	}
	return now.Sub(p.unknownSince) < unknownLagWait
}

// pop removes p's head record and returns it.
func (q *taskQueue) pop(p *partQueue) *kgo.Record {
	r := p.recs[0]
	p.recs[0] = nil
	p.recs = p.recs[1:]
	if len(p.recs) == 0 {
		p.recs = nil // let the poll's backing array go
	}
	q.queued--
	q.bytes -= recordBytes(r)
	return r
}

// fairQueues are the session's queues. Only the record loop uses them,
// except revoked, which the group callbacks fill.
type fairQueues struct {
	perPass, bound int
	tasks          map[topology.TaskID]*taskQueue
	parts          map[changelog.TopicPartition]*partQueue
	// paused are the input partitions the loop paused, with why
	// (pauseBacklog).
	paused map[changelog.TopicPartition]string

	mu      sync.Mutex
	revoked []changelog.TopicPartition

	// polled is when the loop last polled, with or without records
	// (app_lag.go).
	polled time.Time

	// swept is when applyPauses last checked the client's paused
	// partitions for running ones nothing wants paused (pauseSweep);
	// zero asks for a check at the next call.
	swept time.Time
}

// pauseSweep bounds how long a running task's partition stays paused by
// mistake: applyPauses checks the client's paused partitions at least this
// often and resumes the running ones that neither their backlog nor an
// admission hold keeps paused. Pauses are bookkept in several places (the
// assignment callback, resumeRunning, the backlog bound, dropRevoked); a
// pause one of them loses track of would otherwise stop the partition for
// good, silently, with its task running.
const pauseSweep = time.Second

const pauseBacklog = "backlog"

func newFairQueues(perPass, pollRecords int) *fairQueues {
	return &fairQueues{perPass: perPass, bound: queueBound(perPass, pollRecords),
		tasks: map[topology.TaskID]*taskQueue{}, parts: map[changelog.TopicPartition]*partQueue{},
		paused: map[changelog.TopicPartition]string{}}
}

// enqueue appends a partition's fetched records to the queue of task id.
func (f *fairQueues) enqueue(id topology.TaskID, tp changelog.TopicPartition, recs []*kgo.Record, behind int64, polled time.Time) {
	q := f.tasks[id]
	if q == nil {
		q = &taskQueue{id: id}
		f.tasks[id] = q
	}
	p := f.parts[tp]
	if p == nil {
		p = &partQueue{tp: tp}
		f.parts[tp] = p
	}
	if !slices.Contains(q.parts, p) {
		q.parts = append(q.parts, p)
	}
	p.recs = append(p.recs, recs...)
	if len(recs) > 0 {
		p.polls = append(p.polls, pollMark{last: recs[len(recs)-1].Offset, at: polled})
	}
	p.fetched = polled
	p.behind, p.known = behind, true
	q.queued += len(recs)
	for _, r := range recs {
		q.bytes += recordBytes(r)
	}
}

// expect registers the input partitions of a running task id whose lag is
// not known yet: the task waits for their first fetch (taskQueue.next).
func (f *fairQueues) expect(id topology.TaskID, tps []changelog.TopicPartition) {
	q := f.tasks[id]
	if q == nil {
		q = &taskQueue{id: id}
		f.tasks[id] = q
	}
	for _, tp := range tps {
		if f.parts[tp] != nil {
			continue
		}
		p := &partQueue{tp: tp}
		f.parts[tp] = p
		q.parts = append(q.parts, p)
	}
}

// queued is the records queued over all tasks.
func (f *fairQueues) queued() int {
	n := 0
	for _, q := range f.tasks {
		n += q.queued
	}
	return n
}

// busy reports whether the loop has queued records or admission holds to
// look after even when a poll returned nothing: a held partition whose
// queue is empty is paused, so only the loop's retry releases it.
func (f *fairQueues) busy() bool {
	if f.queued() > 0 {
		return true
	}
	for _, p := range f.parts {
		if p.hold.held() {
			return true
		}
	}
	return false
}

// runnable reports whether a pass would process a record now: a running
// task has a queued record that is not held. (A queue whose task has just
// been closed waits for dropRevoked.)
func (s *session) runnable() bool {
	for id, q := range s.fair.tasks {
		if _, ok := s.tasks[id]; ok && q.queued > 0 && q.next(s.now()) != nil {
			return true
		}
	}
	return false
}

// discard empties every queue: the consumer rewound to the committed
// offsets and fetches the records again. Admission holds stay: the tokens
// a tenant owes are owed whatever happens to the transaction.
func (f *fairQueues) discard() {
	for _, q := range f.tasks {
		for _, p := range q.parts {
			clear(p.recs)
			p.recs, p.polls = nil, nil
			// Fetched again from the committed offsets: the lag the
			// last fetch left is no longer the partition's.
			p.known, p.unknownSince = false, time.Time{}
			p.next, p.nextKnown, p.stable = 0, false, 0
		}
		q.queued, q.bytes, q.full = 0, 0, false
	}
}

// revoke records partitions the group took away (a group callback).
func (f *fairQueues) revoke(lost map[string][]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for topic, ps := range lost {
		for _, p := range ps {
			f.revoked = append(f.revoked, changelog.TopicPartition{Topic: topic, Partition: p})
		}
	}
}

// dropRevoked forgets the queues of the partitions revoked since the last
// call: the consumer fetches a partition again from its committed offset
// if it comes back. It runs with no transaction open (or after the commit
// that ended it), so the committed offsets already reflect what was
// processed of them.
func (f *fairQueues) dropRevoked() {
	f.mu.Lock()
	revoked := f.revoked
	f.revoked = nil
	f.mu.Unlock()
	for _, tp := range revoked {
		p := f.parts[tp]
		if p == nil {
			continue
		}
		delete(f.parts, tp)
		if _, ok := f.paused[tp]; ok {
			// The client keeps the pause. The partition may be back on
			// this thread, its task running: without this record only
			// the sweep lifts the pause, so sweep at once.
			delete(f.paused, tp)
			f.swept = time.Time{}
		}
		for id, q := range f.tasks {
			if i := slices.Index(q.parts, p); i >= 0 {
				q.parts = slices.Delete(q.parts, i, i+1)
				q.queued -= len(p.recs)
				for _, r := range p.recs {
					q.bytes -= recordBytes(r)
				}
				if len(q.parts) == 0 {
					delete(f.tasks, id)
				}
			}
		}
	}
}

// limit is the offset each partition with queued records may commit: its
// queue head's.
func (f *fairQueues) limit() txn.OffsetLimit {
	var lim txn.OffsetLimit
	for tp, p := range f.parts {
		h := p.head()
		if h == nil {
			continue
		}
		if lim == nil {
			lim = txn.OffsetLimit{}
		}
		if lim[tp.Topic] == nil {
			lim[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		lim[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: h.LeaderEpoch, Offset: h.Offset}
	}
	return lim
}

// processedOffsets is the consumer's position of each partition it
// consumed from, capped at the queue heads: the next record to process,
// where UncommittedOffsets is the next one to fetch.
func (s *session) processedOffsets() map[string]map[int32]kgo.EpochOffset {
	out := s.cl.UncommittedOffsets()
	lim := s.fair.limit()
	for topic, ps := range out {
		for p, eo := range ps {
			lim.Lower(topic, p, &eo.Offset, &eo.Epoch)
			ps[p] = eo
		}
	}
	return out
}

// queuedOffsets makes the commit protocol commit processed offsets only:
// End commits no partition past its queue head, and Pending (what the
// commit carries, for resolving an unknown outcome and for what was
// consumed) says the same.
type queuedOffsets struct {
	txn.Transactor
	s *session
}

func (q queuedOffsets) End(ctx context.Context, commit bool, md txn.Metadata) (bool, error) {
	// A pipelined End runs off the loop: its limit was pinned when its
	// transaction was sealed (app_pipeline.go).
	lim, pinned := ctx.Value(pinnedLimit{}).(txn.OffsetLimit)
	if !pinned {
		lim = q.s.fair.limit()
	}
	return q.Transactor.End(txn.WithOffsetLimit(ctx, lim), commit, md)
}

func (q queuedOffsets) Pending() txn.Offsets {
	pending := q.Transactor.Pending()
	lim := q.s.fair.limit()
	if len(lim) == 0 {
		return pending
	}
	committed := q.s.cl.CommittedOffsets()
	for topic, ps := range pending {
		for p, off := range ps {
			var epoch int32
			lim.Lower(topic, p, &off, &epoch)
			if c, ok := committed[topic][p]; ok && c.Offset == off {
				delete(ps, p) // nothing of it processed since the last commit
				continue
			}
			ps[p] = off
		}
		if len(ps) == 0 {
			delete(pending, topic)
		}
	}
	return pending
}

// enqueueFetches queues the records of a poll by task. Records of a
// partition no task owns are an error: skipping them would commit offsets
// past them.
//
// The consumer keeps control records (kgo.KeepControlRecords): the commit
// and abort markers of transactional writers are not processed, but they
// are fetched, and only counting them tells a partition at the end of its
// log from one with a record left: on a transactionally written topic
// (every repartition topic) a marker follows the last record. An empty
// partition passed on beside others' records was fetched up to its end.
// It returns the data records queued.
func (s *session) enqueueFetches(fs kgo.Fetches, polled time.Time) (int, error) {
	var unowned error
	queued := 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		n := len(p.Records)
		if p.Err != nil && n == 0 {
			return // error-only (e.g. after a broker restart): pollError's
		}
		// Records with an error are the ones franz-go decoded before a
		// batch it could not read: the consumer's position is past
		// them, so they are queued like any others (skipped, the next
		// commit would take the offsets past them unprocessed).
		tp := changelog.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		lt := s.byInput[tp]
		if lt == nil {
			if n > 0 {
				unowned = fmt.Errorf("records of %s/%d, which no task owns", p.Topic, p.Partition)
			}
			return
		}
		stable := stableOffset(p.FetchPartition)
		if n == 0 {
			s.enqueueEmpty(lt.task.ID(), tp, p.FetchPartition, polled)
			return
		}
		next := p.Records[n-1].Offset + 1
		recs := dataRecords(p.Records)
		queued += len(recs)
		s.fair.enqueue(lt.task.ID(), tp, recs, max(0, stable-next), polled)
		q := s.fair.parts[tp]
		q.next, q.nextKnown, q.stable = next, true, stable
	})
	if unowned != nil {
		// The consumer and the task table disagree (a revocation racing
		// the poll): start over from the committed offsets instead.
		return 0, fmt.Errorf("%w: %v", errRestartSession, unowned)
	}
	return queued, nil
}

// dataRecords is recs without control records, recs itself when it has
// none.
func dataRecords(recs []*kgo.Record) []*kgo.Record {
	if !slices.ContainsFunc(recs, isControl) {
		return recs
	}
	return slices.DeleteFunc(slices.Clone(recs), isControl)
}

func isControl(r *kgo.Record) bool { return r.Attrs.IsControl() }

// processPass runs one pass: up to the per-pass limit of each task's queued
// records, tasks in ID order. It returns the records processed.
func (s *session) processPass(ctx context.Context) (int, error) {
	total := 0
	now := s.now()
	finals := false // a record closed windows: end the pass for their commit
	for _, id := range s.sortedTaskIDs() {
		if finals {
			break
		}
		lt, q := s.tasks[id], s.fair.tasks[id]
		if q == nil || q.queued == 0 {
			continue
		}
		k := 0
		for (s.fair.perPass < 1 || k < s.fair.perPass) && !finals {
			if s.yieldPass() {
				break // app_pipeline.go: the transaction in flight first
			}
			p := q.next(now)
			if p == nil {
				break
			}
			s.polled = p.origin(p.head().Offset)
			r := q.pop(p)
			k++
			if lt.floor != nil && s.reflected(lt, r) {
				continue
			}
			s.inRec = topology.InputRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli(), Headers: headersOf(r)}
			closed := lt.task.WindowsClosed()
			if err := s.processOne(ctx, lt, &s.inRec, r); err != nil {
				return total + k, err
			}
			s.charge(lt, p)
			// Window finals are committed at once (the controller's
			// window_final decision), but only after the pass: the rest
			// of it would hold them back, and when every partition's
			// windows close together, that is every other partition's
			// close. With a transaction in flight they wait for its
			// ack anyway, and yieldPass ends the pass for that.
			finals = lt.task.WindowsClosed() != closed && s.pipe.flight == nil && s.expeditesFinals()
		}
		total += k
		s.app.metrics.taskRecordsIn.WithLabelValues(id.String()).Add(float64(k))
	}
	if total > 0 {
		s.stall.progressed(s.now())
	}
	return total, nil
}

// expeditesFinals reports whether the controller commits window finals at
// once (every policy but the fixed one).
func (s *session) expeditesFinals() bool {
	return s.ctrl != nil && s.ctrl.Options().Policy != frontier.PolicyFixed
}

// observeQueues exports the queues and the lag they are part of, and feeds
// the controller the lag: the records behind each partition's last fetch
// plus those fetched and still queued.
//
// The controller is not told about the backlog of partitions admission
// control throttled within the last throttledFor: that backlog waits by
// the user's choice, and counted as backlog it would have the controller
// believe the loop is draining or overloaded and stretch every tenant's
// commit interval for it.
func (s *session) observeQueues(now time.Time) {
	var lag, ctrlLag int64
	for id, q := range s.fair.tasks {
		var tl int64
		// A task waiting for its held partition (taskQueue.next) waits
		// with all its partitions: their backlog is the rate's too. One
		// waiting for a partition's fetch (records on the broker) is
		// not held: its backlog is the controller's. (Counted out too,
		// a backlogged task's lag vanished from the controller each
		// time it waited between fetches, and the cycle's least
		// backlog, from which it judges an overload, was about 0.)
		waiting := q.heldBack()
		for _, p := range q.parts {
			s.fair.settleBehind(p, now)
			pl := p.behind + int64(len(p.recs))
			tl += pl
			if !waiting && (p.throttled.IsZero() || now.Sub(p.throttled) >= throttledFor) {
				ctrlLag += pl
			}
		}
		lag += tl
		s.app.metrics.taskLag.WithLabelValues(id.String()).Set(float64(tl))
		s.app.metrics.fair.queued.WithLabelValues(id.String()).Set(float64(q.queued))
	}
	s.ctrl.ObserveLag(now, ctrlLag)
	s.app.setThreadLag(s.th, lag)
}

// applyPauses pauses the fetching of the partitions of tasks whose queue
// passed the bound and of partitions held by admission control, and
// resumes those no longer so. It runs every loop iteration, before the
// poll: it also re-pauses what resumeRunning (app_restore.go) resumed.
func (s *session) applyPauses() {
	f := s.fair
	want := map[changelog.TopicPartition]string{}
	for id, q := range f.tasks {
		if f.bound > 0 {
			if q.queued > f.bound || q.bytes > queueByteBound {
				q.full = true
			} else if q.queued <= f.bound/2 && q.bytes <= queueByteBound/2 {
				q.full = false
			}
		}
		if !q.full {
			continue
		}
		if s.tasks[id] == nil {
			continue
		}
		// Only the partitions with queued records: one the task waits
		// for (nothing queued, records on the broker: taskQueue.next)
		// must go on fetching, or the task would wait for good. An
		// empty one fetches at most one more batch before it is paused
		// in turn, so memory stays bounded.
		for _, p := range q.parts {
			if len(p.recs) > 0 {
				want[p.tp] = pauseBacklog
			}
		}
	}
	// A partition held by admission control (app_admit.go) is not paused
	// for the hold itself: its records wait in its queue, and the bound
	// above pauses its fetching once they fill it. Pausing for every hold
	// would pause and resume the partition at the tenant's rate (a hold
	// lasts one token), and kgo drops what it buffered for a paused
	// partition and fetches it again: a throttled tenant would keep the
	// broker and the loop busy refetching its records. Without a bound
	// (fair scheduling off) a hold must pause, or its queue would grow
	// without limit; and so must the task's other partitions, since the
	// task waits for the held one (taskQueue.next).
	if f.bound == 0 {
		for tp, p := range f.parts {
			if !p.hold.held() {
				continue
			}
			want[tp] = pauseBacklog
			if lt := s.byInput[tp]; lt != nil {
				for _, topic := range lt.task.Topics() {
					want[changelog.TopicPartition{Topic: topic, Partition: tp.Partition}] = pauseBacklog
				}
			}
		}
	}
	now := s.now()
	sweep := now.Sub(f.swept) >= pauseSweep
	if len(want) == 0 && len(f.paused) == 0 && !sweep {
		return
	}
	if sweep {
		f.swept = now
	}
	isPaused := map[changelog.TopicPartition]bool{}
	for topic, ps := range s.cl.PauseFetchPartitions(nil) {
		for _, p := range ps {
			isPaused[changelog.TopicPartition{Topic: topic, Partition: p}] = true
		}
	}
	pause, resume := map[string][]int32{}, map[string][]int32{}
	for tp, why := range want {
		if _, running := s.byInput[tp]; !running {
			continue
		}
		f.paused[tp] = why
		if !isPaused[tp] {
			pause[tp.Topic] = append(pause[tp.Topic], tp.Partition)
		}
	}
	for tp := range f.paused {
		if _, ok := want[tp]; ok {
			continue
		}
		delete(f.paused, tp)
		// Only a running task's partition: a restoring task's stay paused
		// until it runs (resumeRunning).
		if _, running := s.byInput[tp]; running && isPaused[tp] {
			resume[tp.Topic] = append(resume[tp.Topic], tp.Partition)
			isPaused[tp] = false // resumed: not a stray for the sweep below
		}
	}
	if sweep {
		// A running task's partition paused for no reason kept here
		// (see pauseSweep). resumeRunning, which runs after the next
		// assignment sync, lifts the pause the assignment callback puts
		// on a partition given back to a running task; lifting it a
		// little earlier here is the same.
		var stray []string
		for tp, p := range isPaused {
			if !p {
				continue // resumed above
			}
			if _, running := s.byInput[tp]; !running {
				continue // restoring, or no longer ours
			}
			if _, ok := want[tp]; ok {
				continue
			}
			resume[tp.Topic] = append(resume[tp.Topic], tp.Partition)
			stray = append(stray, tp.String())
		}
		if len(stray) > 0 && !s.assignmentChanged() {
			slices.Sort(stray)
			s.app.log.Warn("resumed input partitions of running tasks that were paused for no reason", "thread", s.th.index, "partitions", stray)
		}
	}
	if len(pause) > 0 {
		s.cl.PauseFetchPartitions(pause)
	}
	if len(resume) > 0 {
		s.cl.ResumeFetchPartitions(resume)
	}
	s.app.setThreadPaused(s.th, len(f.paused))
}

// pollWait bounds the loop's poll wait by the queues: no wait while a pass
// has records to process, until the earliest admission retry while
// partitions are held.
func (s *session) pollWait(wait time.Duration) time.Duration {
	if s.runnable() {
		return 0
	}
	if at, ok := s.nextRelease(); ok {
		wait = min(wait, max(time.Until(at), time.Millisecond))
	}
	return wait
}

// fairMetrics are the scheduler's and admission control's metrics.
type fairMetrics struct {
	queued    *prometheus.GaugeVec
	paused    prometheus.Gauge
	throttled *prometheus.CounterVec
}

func newFairMetrics(labels prometheus.Labels, register func(prometheus.Collector)) *fairMetrics {
	m := &fairMetrics{
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_task_queued_records",
			Help:        "Records fetched for a task and not yet processed: the fair scheduler's queue (Config.MaxRecordsPerTaskPass).",
			ConstLabels: labels}, []string{"task"}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_paused_partitions",
			Help:        "Input partitions whose fetching the record loop has paused: their task's queue is over its bound, or admission control holds them for a tenant over its rate.",
			ConstLabels: labels}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_tenant_throttled_seconds_total",
			Help:        "Seconds input partitions were held because the tenant of their last processed record was over its rate (frontier TenantOptions.Rate), summed over partitions.",
			ConstLabels: labels}, []string{"tenant"}),
	}
	register(m.queued)
	register(m.paused)
	register(m.throttled)
	return m
}
