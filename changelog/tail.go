package changelog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// Tailing: a restore that does not stop at the end.
//
// A standby replica keeps a task's state current from its changelogs
// without running the task. Restoring round after round does that, but
// each round plans (an admin client listing offsets and configs) and reads
// (a consumer) with clients of its own, connected, used for a fraction of
// a second and closed: a standby with a 250 ms pause between rounds made
// eight Kafka clients a second, each with its own connections and
// metadata requests, for nothing but the records a long-lived consumer
// would have received anyway.
//
// TaskState.Tail starts with a Restore, so every check of the restore path
// applies where the tail starts: local state that is missing, older than
// delete.retention.ms, below the log start or from a recreated topic is
// rebuilt; a staged apply left behind is finished. From the positions the
// restore reached it then fetches continuously with one read_committed
// client (control records kept, so commit and abort markers move the
// position as in a restore), applies each fetch's records to Badger and,
// after them, records the positions the way a restore does (offset, time,
// topic id), so a process that stops or dies at any point leaves offsets
// that never claim more than Badger holds, and the next restore or tail
// picks up from there. Only committed changes are read: an open
// transaction of the active owner is read once it commits, an aborted one
// never.
//
// The tail has no reset policy: a position that falls out of the log (the
// log start moved past it, the topic was recreated) is a fetch error, Tail
// returns it, and the caller's next Tail rebuilds through the restore
// path. Transient fetch errors (a broker restart, a leader election) are
// the client's to retry.

// TailOptions configure TaskState.Tail.
type TailOptions struct {
	// RestoreOptions configure the restore the tail starts with; its
	// ClientOpts, Logger and Now serve the tail too. Its Progress and
	// Listener hear of that restore only.
	RestoreOptions
	// OnTail, when set, is called once the starting restore is done and
	// the tail's client connected, after every fetch whose records were
	// applied, and at least every LagInterval: where the tail stands. It
	// is called on Tail's goroutine and should return quickly.
	OnTail func(TailProgress)
	// LagInterval is how often the lag is measured (one ListOffsets
	// request) when fetches do not carry it. Default 1s.
	LagInterval time.Duration
	// FetchMaxWait is how long the broker holds a fetch with nothing to
	// return (a long poll). A record that becomes readable is returned at
	// once either way. Default 500ms.
	FetchMaxWait time.Duration
}

// TailProgress is where a tail stands.
type TailProgress struct {
	// Restored is what the starting restore applied; Applied counts the
	// records (markers excluded) the tail applied since.
	Restored, Applied int64
	// Lag is the offsets between each changelog partition's position and
	// its last stable offset, summed, as last measured; -1 before the
	// first measurement.
	Lag int64
	// Offsets are the positions recorded in Badger.
	Offsets ChangelogOffsets
}

// Tail brings every logged store of the task up to date, as Restore does,
// then keeps following their changelogs until ctx ends, applying what is
// committed as it becomes readable (see the comment above). It returns nil
// when ctx ends, with every applied record's position recorded, and an
// error when the restore, the client, a fetch, or a write fails; the
// caller may then Tail again, which restarts with a restore.
//
// Like Restore, Tail needs the stores open and an empty overlay, and
// nothing may read or write the stores while it runs: it is for a task
// that is not processing (a standby). Tail uses one Kafka client for its
// whole run, besides the starting restore's.
func (t *TaskState) Tail(ctx context.Context, opts TailOptions) error {
	if opts.LagInterval <= 0 {
		opts.LagInterval = time.Second
	}
	if opts.FetchMaxWait <= 0 {
		opts.FetchMaxWait = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = t.log
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	res, err := t.Restore(ctx, opts.RestoreOptions)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("changelog: tail task %s: %w", t.cfg.ID, err)
	}
	tl := &tailer{t: t, opts: opts, byTP: map[TopicPartition]*restoreState{}, lso: map[TopicPartition]int64{},
		progress: TailProgress{Restored: res.Records, Lag: -1}}
	for _, st := range t.stores {
		if !st.spec.Logged || st.closed {
			continue
		}
		tp := TopicPartition{st.topic, t.cfg.Partition}
		pos, ok := res.Offsets[tp]
		if !ok {
			return fmt.Errorf("changelog: tail task %s: the restore did not reach %s", t.cfg.ID, tp)
		}
		kind := res.Kinds[tp]
		if kind == 0 {
			kind = st.spec.Kind
		}
		s := &restoreState{RestoreTarget: RestoreTarget{Store: st.spec.Name, Partition: t.cfg.Partition, Topic: st.topic, Kind: kind, Task: t.cfg.ID},
			tdb: t.tdb, id: st.id, dprefix: withNS(nsData, st.id), cut: st.cut, pos: pos, from: pos, topicID: res.TopicIDs[st.topic]}
		tl.byTP[tp] = s
	}
	if len(tl.byTP) == 0 {
		<-ctx.Done()
		return nil
	}
	err = tl.run(ctx)
	t.resetSnapshot()
	if t.tdb != nil {
		t.tdb.noteErr(err)
	}
	return err
}

// tailer is one run of TaskState.Tail past its restore.
type tailer struct {
	t        *TaskState
	opts     TailOptions
	byTP     map[TopicPartition]*restoreState
	lso      map[TopicPartition]int64 // last stable offsets as last seen
	progress TailProgress
	sl       slab
}

func (tl *tailer) run(ctx context.Context) error {
	db, tdb := tl.t.db, tl.t.tdb
	assign := map[string]map[int32]kgo.Offset{}
	var topics []string
	for tp, s := range tl.byTP {
		if assign[tp.Topic] == nil {
			assign[tp.Topic] = map[int32]kgo.Offset{}
			topics = append(topics, tp.Topic)
		}
		assign[tp.Topic][tp.Partition] = kgo.NewOffset().At(s.pos)
	}
	cl, err := db.newClient(append(slices.Clone(tl.opts.ClientOpts),
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		// A position outside the log is an error for the restore path to
		// handle (a rebuild), never a silent jump.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxPartitionBytes(2<<20),
		kgo.FetchMaxBytes(4<<20),
		kgo.FetchMaxWait(tl.opts.FetchMaxWait),
	)...)
	if err != nil {
		return fmt.Errorf("changelog: tail task %s: new client: %w", tl.t.cfg.ID, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tl.opts.Logger.Info("tailing changelogs", "task", tl.t.cfg.ID, "from", tl.offsets(), "restored", tl.progress.Restored)

	lastLag := time.Now()
	tl.measureLag(ctx, adm, topics)
	tl.report()
	lastRecord := time.Now()
	var lastWarn, lastGone time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, tl.opts.LagInterval)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil // every applied fetch's positions are recorded
		}
		var ferr error
		gone := false
		fs.EachError(func(topic string, p int32, err error) {
			switch {
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				// pctx's timeout: nothing arrived within LagInterval.
			case retry.Transient(err):
				gone = gone || topicGone(err)
				if time.Since(lastWarn) >= 5*time.Second {
					lastWarn = time.Now()
					tl.opts.Logger.Warn("tail: fetch failed, retrying", "task", tl.t.cfg.ID, "topic", topic, "partition", p, "err", err)
				}
			default:
				ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
			}
		})
		if ferr != nil {
			return fmt.Errorf("changelog: tail task %s: %w", tl.t.cfg.ID, ferr)
		}
		if gone && time.Since(lastGone) >= tl.opts.LagInterval {
			lastGone = time.Now()
			if err := recreatedTopic(ctx, adm, slices.Collect(maps.Values(tl.byTP)), tl.opts.Logger); err != nil {
				return fmt.Errorf("changelog: tail task %s: %w", tl.t.cfg.ID, err)
			}
		}
		applied, moved, err := tl.apply(tdb, fs)
		if err != nil {
			return fmt.Errorf("changelog: tail task %s: %w", tl.t.cfg.ID, err)
		}
		// Refresh the recorded time now and then while idle too: it is
		// what the restore path's delete.retention.ms check reads, and a
		// tail that is caught up has seen every tombstone.
		if moved || time.Since(lastRecord) >= time.Minute {
			if err := tl.record(tdb); err != nil {
				return fmt.Errorf("changelog: tail task %s: %w", tl.t.cfg.ID, err)
			}
			lastRecord = time.Now()
		}
		tl.progress.Applied += applied
		measured := false
		if time.Since(lastLag) >= tl.opts.LagInterval {
			lastLag, measured = time.Now(), true
			tl.measureLag(ctx, adm, topics)
		}
		if moved || measured {
			tl.report()
		}
	}
}

// apply writes a fetch's records into the task DB: data first, flushed,
// before the caller records the new positions. It does not stop for a
// cancelled context: a fetch is applied and recorded whole, then the loop
// ends.
func (tl *tailer) apply(tdb *taskDB, fs kgo.Fetches) (n int64, moved bool, err error) {
	if err := tdb.dirLost(); err != nil {
		return 0, false, err
	}
	wb := tdb.bdb.NewWriteBatch()
	defer wb.Cancel()
	var written int64
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		s := tl.byTP[TopicPartition{fp.Topic, fp.Partition}]
		if s == nil || err != nil {
			return
		}
		if fp.LastStableOffset >= 0 {
			tl.lso[s.tp()] = fp.LastStableOffset
		}
		for _, r := range fp.Records {
			if r.Offset < s.pos {
				continue
			}
			if !r.Attrs.IsControl() {
				written += int64(len(r.Key) + len(s.dprefix) + len(r.Value))
				if aerr := s.apply(wb, r, &tl.sl); aerr != nil {
					err = fmt.Errorf("store %q partition %d offset %d: %w", s.Store, s.Partition, r.Offset, aerr)
					return
				}
				n++
			}
			s.pos = r.Offset + 1
			moved = true
		}
	})
	if err != nil || !moved {
		return 0, false, err
	}
	if err := wb.Flush(); err != nil {
		return 0, false, fmt.Errorf("write task DB %s: %w", tdb.id, err)
	}
	tl.t.db.written.Add(written)
	return n, true, nil
}

// record writes every position, as a restore's end does.
func (tl *tailer) record(tdb *taskDB) error {
	now := tl.opts.Now()
	err := tdb.bdb.Update(func(txn *badger.Txn) error {
		for _, s := range tl.byTP {
			if err := txn.Set(offsetKey(s.Topic, s.Partition), encodeApplied(s.pos, now, s.topicID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record offsets in task DB %s: %w", tdb.id, err)
	}
	return nil
}

// ErrChangelogRecreated means a changelog topic was deleted and created
// again while a tail followed it: the positions the tail holds belong to
// the old incarnation.
var ErrChangelogRecreated = errors.New("changelog: the changelog topic was recreated")

// recreatedTopic returns ErrChangelogRecreated when the topic of one of
// states exists with another topic id than the one its reading started
// on. The client never adopts a recreated topic's new id (franz-go fails
// its fetches with UNKNOWN_TOPIC_ID for good), so the fetch error alone
// looks transient: a tail or restore that retried it did so forever,
// and a tail kept the old incarnation's state and measured its lag
// against the new topic's offsets (0 when the new topic is shorter: a
// standby "caught up" on state that is gone). Returning the error lets
// the caller's next restore rebuild, as it sees the new id. A topic that
// is missing, or that cannot be described now, is left to the fetches'
// retries.
func recreatedTopic(ctx context.Context, adm *kadm.Client, states []*restoreState, log interface {
	Debug(string, ...any)
}) error {
	var topics []string
	for _, s := range states {
		if !slices.Contains(topics, s.Topic) {
			topics = append(topics, s.Topic)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	details, err := adm.ListTopics(dctx, topics...)
	if err != nil {
		log.Debug("describe changelog topics", "topics", topics, "err", err)
		return nil
	}
	for _, s := range states {
		d, ok := details[s.Topic]
		if !ok || d.Err != nil || s.topicID == ([16]byte{}) || d.ID == s.topicID {
			continue
		}
		return fmt.Errorf("%w: %s has topic id %s, reading started on %s", ErrChangelogRecreated, s.Topic, d.ID, kadm.TopicID(s.topicID))
	}
	return nil
}

// topicGone reports whether a fetch error may mean that the topic was
// deleted (and perhaps recreated).
func topicGone(err error) bool {
	return errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
}

// measureLag lists the last stable offsets through the tail's own client.
// A failure keeps the previous figures: the lag is a report, not a
// decision the tail makes.
func (tl *tailer) measureLag(ctx context.Context, adm *kadm.Client, topics []string) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lso, err := adm.ListCommittedOffsets(lctx, topics...)
	if err != nil {
		tl.opts.Logger.Debug("tail: list last stable offsets", "task", tl.t.cfg.ID, "err", err)
		return
	}
	lso.Each(func(o kadm.ListedOffset) {
		tp := TopicPartition{o.Topic, o.Partition}
		if _, ok := tl.byTP[tp]; ok && o.Err == nil {
			tl.lso[tp] = o.Offset
		}
	})
}

// report computes the lag and calls OnTail.
func (tl *tailer) report() {
	lag := int64(0)
	for tp, s := range tl.byTP {
		l, ok := tl.lso[tp]
		if !ok {
			lag = -1
			break
		}
		lag += max(0, l-s.pos)
	}
	tl.progress.Lag = lag
	if tl.opts.OnTail != nil {
		p := tl.progress
		p.Offsets = tl.offsets()
		tl.opts.OnTail(p)
	}
}

func (tl *tailer) offsets() ChangelogOffsets {
	out := ChangelogOffsets{}
	for tp, s := range tl.byTP {
		out[tp] = s.pos
	}
	return out
}

// newClient creates a Kafka client for a restore or a tail and counts it
// (DBStats.KafkaClients).
func (db *DB) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	db.clients.Add(1)
	return kgo.NewClient(opts...)
}
