package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/store"
)

// RestoreTarget is one store partition to bring up to date from its
// changelog partition (the store's partition of Topic).
type RestoreTarget struct {
	Store     string
	Partition int32
	Topic     string
	// Kind, when set, is checked against every record's kind tag, so a
	// store is never filled from another store's changelog. Replay leaves
	// it zero and learns the kind from the records.
	Kind store.Kind
	// MinOffset is the changelog position the group's committed input
	// offsets reflect: every change the committed outputs depend on lies
	// below it. A restore never ends before it. 0: unknown (a first run).
	MinOffset int64
	// Task is the task whose DB DB.Restore restores the store into.
	// Default: the task DB that holds the store already, else "p<partition>".
	// TaskState.Restore restores into its own.
	Task string
}

func (t RestoreTarget) tp() TopicPartition { return TopicPartition{t.Topic, t.Partition} }

// taskTarget is a RestoreTarget with the task DB it restores into.
type taskTarget struct {
	RestoreTarget
	tdb *taskDB
}

// RestoreOptions configure a restore.
type RestoreOptions struct {
	// ClientOpts reach the cluster: seed brokers, TLS, SASL, dial timeout.
	// Restore adds its own consumer options (read_committed, partitions).
	ClientOpts []kgo.Opt
	// Progress, when set, is called once before the first read when there
	// is something to restore (Restored 0, Remaining = Total), about every
	// ProgressInterval, once when a sorted rebuild starts merging what it
	// read (Remaining 0, Phase RestorePhaseMerging) and about every
	// ProgressInterval during the merge, and once at the end (Done set);
	// it is the hook for metrics.
	Progress         func(RestoreProgress)
	ProgressInterval time.Duration // default 1s
	// Logger for progress lines (every 5 s) and rebuild decisions; default
	// the DB's logger.
	Logger *slog.Logger
	// Now is the clock for the delete.retention.ms check; default time.Now.
	Now func() time.Time
	// PendingTxnWait bounds how long Restore waits, once every MinOffset
	// is stable, for a changelog's last stable offset to reach its high
	// watermark (see endOffsets). Default 1s; negative: do not wait.
	PendingTxnWait time.Duration
	// MinOffsets are TaskState.Restore's floors: each changelog partition's
	// RestoreTarget.MinOffset. DB.Restore reads them from the targets.
	MinOffsets ChangelogOffsets
	// Unblock is called while a changelog's last stable offset is below
	// a target's MinOffset: an open transaction of another producer pins
	// it (a member that died mid-transaction, or whose markers are still
	// being written). The runtime fences departed members' transactions
	// here. Called at most once a second; its error is logged, not fatal.
	Unblock func(ctx context.Context) error
	// Listener, when set, hears of each changelog partition that has
	// something to restore: its start, every fetched batch applied, and
	// its end once the whole restore is written (see RestoreListener).
	Listener RestoreListener
	// Pace, when set, throttles the restore (see PaceFunc): it is called
	// between batches of applied records.
	Pace PaceFunc
}

// RestoreProgress is a snapshot of a running restore.
type RestoreProgress struct {
	Restored  int64         // records applied so far (markers excluded)
	Remaining int64         // offsets left until every end offset
	Total     int64         // offsets to read at the start
	Rate      float64       // records per second since the start
	Elapsed   time.Duration //
	Rebuilt   []TopicPartition
	Done      bool
	// Phase is RestorePhaseReading while the changelogs are read, then
	// RestorePhaseMerging while a sorted rebuild merges what it read into
	// its task DB (everything is read: Remaining is 0).
	Phase string
	// Merged is the keys the merge has written so far.
	Merged int64
}

// The phases of a restore (RestoreProgress.Phase).
const (
	RestorePhaseReading = "reading"
	RestorePhaseMerging = "merging"
)

// RestoreResult summarises a finished restore.
type RestoreResult struct {
	Records  int64
	Duration time.Duration
	// Rebuilt lists the partitions restored from their log start because
	// local state was missing, older than delete.retention.ms, or did not
	// fit the topic's offsets.
	Rebuilt []TopicPartition
	// Offsets is where each target now stands.
	Offsets ChangelogOffsets
	// Kinds is each target's store kind: as given, or learned from the
	// records' tags (zero when the changelog held nothing).
	Kinds map[TopicPartition]store.Kind
	// TopicIDs are the changelog topics' ids.
	TopicIDs map[string][16]byte
}

type restoreState struct {
	RestoreTarget
	tdb     *taskDB
	id      []byte
	dprefix []byte
	cut     int64
	from    int64
	end     int64 // last stable offset at the start of the restore
	pos     int64
	topicID [16]byte
	// restored counts the records applied (markers excluded), for the
	// listener.
	restored int64
}

// Restore brings each target up to its changelog's last stable offset:
// from the applied offset Badger recorded, or from the log start when local
// state is missing, older than the topic's delete.retention.ms (tombstones
// it did not see may be gone), or outside the topic's offsets (the topic
// was recreated). It reads read_committed, so aborted writes never appear,
// and it is done when the fetch position reaches the end offset: the
// consumer keeps control records, so a trailing commit or abort marker
// moves the position too. A task DB that takes more than
// restoreModeMinOffsets offsets is written in restore mode
// (restoremode.go), or, when it holds no data yet, sorted (rebuild.go).
//
// Restore is idempotent: a crash part-way leaves the old offsets in Badger
// and the next restore replays from there. Nothing may read the targets
// while it runs. DB.Restore is for tools (replay); it opens the task DBs it
// writes until the DB closes. See RestoreTarget.Task for where each store
// goes.
func (db *DB) Restore(ctx context.Context, targets []RestoreTarget, opts RestoreOptions) (RestoreResult, error) {
	if db.opts.ReadOnly {
		return RestoreResult{Offsets: ChangelogOffsets{}}, errors.New("changelog: restore into a read-only DB")
	}
	tts := make([]taskTarget, 0, len(targets))
	for _, t := range targets {
		tdb, err := db.storeDB(t.Store, t.Partition, t.Task)
		if err != nil {
			return RestoreResult{Offsets: ChangelogOffsets{}}, fmt.Errorf("changelog: restore store %q partition %d: %w", t.Store, t.Partition, err)
		}
		tts = append(tts, taskTarget{t, tdb})
	}
	return db.restore(ctx, tts, opts)
}

func (db *DB) restore(ctx context.Context, targets []taskTarget, opts RestoreOptions) (res RestoreResult, err error) {
	start := time.Now()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = db.log
	}
	if opts.PendingTxnWait == 0 {
		opts.PendingTxnWait = time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	res = RestoreResult{Offsets: ChangelogOffsets{}}
	if len(targets) == 0 {
		return res, nil
	}
	if db.opts.ReadOnly {
		return res, errors.New("changelog: restore into a read-only DB")
	}
	var tdbs []*taskDB
	for _, t := range targets {
		if !slices.Contains(tdbs, t.tdb) {
			tdbs = append(tdbs, t.tdb)
		}
	}
	defer func() {
		for _, tdb := range tdbs {
			tdb.noteErr(err)
		}
	}()
	// A staged Apply whose copy failed in this process (not a crash: the
	// open would have finished it) left its marker and new offsets behind;
	// the offsets are only true once the copy is done.
	for _, tdb := range tdbs {
		if err := tdb.recoverStaged(); err != nil {
			return res, fmt.Errorf("changelog: restore: finish an interrupted apply in task DB %s: %w", tdb.id, err)
		}
	}
	admCl, err := db.newClient(opts.ClientOpts...)
	if err != nil {
		return res, fmt.Errorf("changelog: restore: new client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	states, err := db.planRestore(ctx, adm, targets, opts, &res)
	if err != nil {
		return res, err
	}
	assign := map[string]map[int32]kgo.Offset{}
	byTP := map[TopicPartition]*restoreState{}
	perDB := map[*taskDB]int64{}
	var total int64
	for _, s := range states {
		byTP[s.tp()] = s
		if s.pos < s.end {
			if assign[s.Topic] == nil {
				assign[s.Topic] = map[int32]kgo.Offset{}
			}
			assign[s.Topic][s.Partition] = kgo.NewOffset().At(s.pos)
			total += s.end - s.pos
			perDB[s.tdb] += s.end - s.pos
		}
	}
	if total > 0 {
		var inMode []*taskDB
		defer func() {
			for _, tdb := range inMode { // after an error
				if lerr := tdb.leaveRestoreMode(); lerr != nil && err == nil {
					err = lerr
				}
			}
		}()
		for _, tdb := range tdbs {
			if perDB[tdb] < db.opts.restoreModeMin() {
				continue
			}
			ok, err := tdb.enterRestoreMode()
			if err != nil {
				return res, err
			}
			if ok {
				inMode = append(inMode, tdb)
			}
		}
		rebuilds, err := db.rebuildable(inMode)
		if err != nil {
			return res, err
		}
		n, err := db.consume(ctx, tdbs, rebuilds, byTP, assign, total, start, opts, &res)
		res.Records = n
		if err != nil {
			return res, err
		}
		for _, tdb := range inMode {
			if db.opts.restoreHook != nil {
				db.opts.restoreHook(tdb)
			}
		}
		// The restored writes reach Badger's tables as the close flushes
		// the memtable; the offsets are written after them, below.
		for len(inMode) > 0 {
			tdb := inMode[0]
			inMode = inMode[1:]
			if err := tdb.leaveRestoreMode(); err != nil {
				return res, err
			}
		}
	}
	for _, tdb := range tdbs {
		err = tdb.bdb.Update(func(txn *badger.Txn) error {
			for _, s := range states {
				if s.tdb != tdb {
					continue
				}
				if err := txn.Set(offsetKey(s.Topic, s.Partition), encodeApplied(s.pos, opts.Now(), s.topicID)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("changelog: restore: record offsets in task DB %s: %w", tdb.id, err)
		}
	}
	if opts.Listener != nil {
		for _, s := range states {
			if s.from < s.end {
				opts.Listener.OnRestoreEnd(s.tp(), s.Store, s.restored)
			}
		}
	}
	res.Kinds = map[TopicPartition]store.Kind{}
	res.TopicIDs = map[string][16]byte{}
	for _, s := range states {
		res.Offsets[s.tp()] = s.pos
		res.Kinds[s.tp()] = s.Kind
		res.TopicIDs[s.Topic] = s.topicID
	}
	res.Duration = time.Since(start)
	if opts.Progress != nil {
		opts.Progress(RestoreProgress{Restored: res.Records, Total: total, Elapsed: res.Duration,
			Rate: rate(res.Records, res.Duration), Rebuilt: res.Rebuilt, Done: true})
	}
	opts.Logger.Info("restore done", "records", res.Records, "duration", res.Duration.Round(time.Millisecond),
		"records_per_s", int64(rate(res.Records, res.Duration)), "rebuilt", len(res.Rebuilt))
	return res, nil
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// planRestore reads the topics' offsets and configs and decides, per
// target, where to start; partitions that need a rebuild are wiped first.
func (db *DB) planRestore(ctx context.Context, adm *kadm.Client, tts []taskTarget, opts RestoreOptions, res *RestoreResult) ([]*restoreState, error) {
	targets := make([]RestoreTarget, len(tts))
	for i, t := range tts {
		targets[i] = t.RestoreTarget
	}
	var topics []string
	seen := map[string]bool{}
	for _, t := range targets {
		if !seen[t.Topic] {
			seen[t.Topic] = true
			topics = append(topics, t.Topic)
		}
	}
	var starts kadm.ListedOffsets
	var configs kadm.ResourceConfigs
	appearBy := time.Now().Add(topicAppearWait)
	err := retry.Do(ctx, opts.Logger, "list changelog start offsets", func(ctx context.Context) error {
		var err error
		if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
			return err
		}
		if err := transientPartitionErr(starts); err != nil {
			return err
		}
		if err := unknownTarget(starts, targets); err != nil && time.Now().Before(appearBy) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("changelog: restore: list start offsets of %v: %w", topics, err)
	}
	ends, hwms, err := endOffsets(ctx, adm, topics, targets, opts)
	if err != nil {
		return nil, err
	}
	var details kadm.TopicDetails
	err = retry.Do(ctx, opts.Logger, "describe changelog topics", func(ctx context.Context) error {
		var err error
		details, err = adm.ListTopics(ctx, topics...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("changelog: restore: describe %v: %w", topics, err)
	}
	err = retry.Do(ctx, opts.Logger, "describe changelog configs", func(ctx context.Context) error {
		var err error
		configs, err = adm.DescribeTopicConfigs(ctx, topics...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("changelog: restore: describe configs of %v: %w", topics, err)
	}
	var states []*restoreState
	for i, t := range targets {
		tdb := tts[i].tdb
		so, ok1 := starts.Lookup(t.Topic, t.Partition)
		eo, ok2 := ends.Lookup(t.Topic, t.Partition)
		ho, ok3 := hwms.Lookup(t.Topic, t.Partition)
		if !ok1 || !ok2 || !ok3 || errors.Is(so.Err, kerr.UnknownTopicOrPartition) || errors.Is(eo.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("changelog: restore store %q partition %d: topic %s partition %d: %w",
				t.Store, t.Partition, t.Topic, t.Partition, ErrTopicNotFound)
		}
		if so.Err != nil || eo.Err != nil || ho.Err != nil {
			return nil, fmt.Errorf("changelog: restore %s/%d: list offsets: %w", t.Topic, t.Partition, errors.Join(so.Err, eo.Err, ho.Err))
		}
		s := &restoreState{RestoreTarget: t, tdb: tdb, id: storeID(t.Store, t.Partition), end: eo.Offset, topicID: details[t.Topic].ID}
		s.dprefix = withNS(nsData, s.id)
		applied, found, err := tdb.appliedOffset(t.tp())
		if err != nil {
			return nil, err
		}
		retention := deleteRetention(configs, t.Topic)
		reason := ""
		switch {
		case !found:
			reason = "no local state"
		case applied.TopicID != ([16]byte{}) && applied.TopicID != s.topicID:
			reason = "the changelog topic was recreated since the local state was written (its id changed)"
		case applied.Offset < so.Offset:
			reason = fmt.Sprintf("applied offset %d is below the log start %d", applied.Offset, so.Offset)
		case applied.Offset > ho.Offset:
			reason = fmt.Sprintf("applied offset %d is past the end %d (topic recreated?)", applied.Offset, ho.Offset)
		case eo.Offset > applied.Offset && opts.Now().Sub(applied.At) > retention:
			reason = fmt.Sprintf("local state from %s is older than delete.retention.ms (%s)", applied.At.Format(time.RFC3339), retention)
		}
		if reason != "" {
			logRebuild(opts.Logger, t, found, applied.Offset, reason, so.Offset, eo.Offset)
			if err := tdb.wipe(s.id, t.tp()); err != nil {
				return nil, fmt.Errorf("changelog: rebuild store %q partition %d: wipe: %w", t.Store, t.Partition, err)
			}
			s.from = so.Offset
			res.Rebuilt = append(res.Rebuilt, t.tp())
		} else {
			// Local state at or past the end needs nothing: it holds only
			// committed changes (Apply follows the commit), which the last
			// stable offset may not show yet while another producer's
			// transaction pins it.
			s.from = applied.Offset
		}
		s.pos = s.from
		if s.cut, err = tdb.readCut(s.id); err != nil {
			return nil, fmt.Errorf("changelog: restore store %q partition %d: %w", t.Store, t.Partition, err)
		}
		states = append(states, s)
	}
	return states, nil
}

// ErrChangelogTruncated means a changelog ends below the position the
// group's committed offsets say it reached: records the committed outputs
// depend on are gone (the topic was deleted and recreated, or an unclean
// leader election truncated it). Restoring would silently lose state; the
// application must be reset.
var ErrChangelogTruncated = errors.New("changelog: ends below the committed position")

// endOffsets lists the offsets a restore reads to: the last stable offset
// of each changelog partition (kadm's ListCommittedOffsets, read_committed
// isolation), never the high watermark, and never less than the
// MinOffset of a target.
//
// A last stable offset below a MinOffset means a transaction of another
// producer pins it: records committed after that transaction began are
// not readable yet. Settling for it would lose them (and the input offsets
// committed with them would make the task skip their inputs), so
// endOffsets waits, calling opts.Unblock to fence departed members, for as
// long as ctx allows.
//
// Once every MinOffset is stable, a last stable offset still below the high
// watermark is an open transaction that does not matter for this restore
// (its owner will abort it, or its markers are still being written after
// a commit without input offsets): endOffsets gives it PendingTxnWait to
// settle, then reads to what is stable.
func endOffsets(ctx context.Context, adm *kadm.Client, topics []string, targets []RestoreTarget, opts RestoreOptions) (lso, hwm kadm.ListedOffsets, err error) {
	floor := map[TopicPartition]int64{}
	for _, t := range targets {
		floor[t.tp()] = max(floor[t.tp()], t.MinOffset)
	}
	start := time.Now()
	var pendingSince, lastUnblock, lastLog time.Time
	unblock := func(force bool) {
		if opts.Unblock == nil || (!force && time.Since(lastUnblock) < time.Second) {
			return
		}
		lastUnblock = time.Now()
		if err := opts.Unblock(ctx); err != nil {
			opts.Logger.Warn("restore: could not end the transactions that pin the changelog", "err", err)
		}
	}
	for {
		err := retry.Do(ctx, opts.Logger, "list changelog end offsets", func(ctx context.Context) error {
			var err error
			if lso, err = adm.ListCommittedOffsets(ctx, topics...); err != nil {
				return err
			}
			if err = transientPartitionErr(lso); err != nil {
				return err
			}
			if hwm, err = adm.ListEndOffsets(ctx, topics...); err != nil {
				return err
			}
			return transientPartitionErr(hwm)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("changelog: restore: list end offsets of %v: %w", topics, err)
		}
		var short, behind []string
		for tp, min := range floor {
			l, ok1 := lso.Lookup(tp.Topic, tp.Partition)
			h, ok2 := hwm.Lookup(tp.Topic, tp.Partition)
			if !ok1 || !ok2 || l.Err != nil || h.Err != nil {
				continue // planRestore reports it
			}
			if h.Offset < min {
				return nil, nil, fmt.Errorf("%w: %s ends at %d but the committed offsets reflect changes up to %d; reset the application (tidemark replay can rebuild local state from what is left)",
					ErrChangelogTruncated, tp, h.Offset, min)
			}
			if l.Offset < min {
				short = append(short, fmt.Sprintf("%s (stable %d, committed position %d, end %d)", tp, l.Offset, min, h.Offset))
			} else if l.Offset < h.Offset {
				behind = append(behind, fmt.Sprintf("%s (stable %d, end %d)", tp, l.Offset, h.Offset))
			}
		}
		switch {
		case len(short) > 0:
			unblock(false)
			if time.Since(lastLog) >= 5*time.Second {
				lastLog = time.Now()
				opts.Logger.Warn("restore waits for the changelog to reach the committed position: an open transaction pins the last stable offset",
					"partitions", short, "waited", time.Since(start).Round(time.Millisecond))
			}
		case len(behind) > 0:
			if pendingSince.IsZero() {
				pendingSince = time.Now()
				unblock(true)
			}
			if opts.PendingTxnWait < 0 || time.Since(pendingSince) >= opts.PendingTxnWait {
				opts.Logger.Info("restoring to the last stable offset; later records belong to a transaction that is not committed",
					"partitions", behind)
				return lso, hwm, nil
			}
		default:
			return lso, hwm, nil
		}
		if err := retry.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, nil, fmt.Errorf("changelog: restore: waiting for stable offsets %v: %w", short, err)
		}
	}
}

// topicAppearWait is how long a restore takes UNKNOWN_TOPIC_OR_PARTITION
// for a topic that is still appearing before it says ErrTopicNotFound: a
// broker answers that for a moment after CreateTopics returned (the
// application creates its changelog topics just before it restores them).
const topicAppearWait = 10 * time.Second

// unknownTarget is an UNKNOWN_TOPIC_OR_PARTITION error if offs lacks a
// target's partition or says it does not exist.
func unknownTarget(offs kadm.ListedOffsets, targets []RestoreTarget) error {
	for _, t := range targets {
		o, ok := offs.Lookup(t.Topic, t.Partition)
		if !ok || errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("%s/%d: %w", t.Topic, t.Partition, kerr.UnknownTopicOrPartition)
		}
	}
	return nil
}

// transientPartitionErr returns the first per-partition error of a listing
// that a retry may fix (LEADER_NOT_AVAILABLE after a broker restart, ...).
func transientPartitionErr(offs kadm.ListedOffsets) error {
	var err error
	offs.Each(func(o kadm.ListedOffset) {
		if err == nil && o.Err != nil && retry.Transient(o.Err) && !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			err = fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err)
		}
	})
	return err
}

// deleteRetention is the topic's delete.retention.ms, or Kafka's default.
func deleteRetention(configs kadm.ResourceConfigs, topic string) time.Duration {
	d := 24 * time.Hour
	rc, err := configs.On(topic, nil)
	if err != nil {
		return d
	}
	for _, c := range rc.Configs {
		if c.Key == "delete.retention.ms" && c.Value != nil {
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
				d = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return d
}

// wipe deletes a store partition's data, index, expiry cut and input
// position, before a rebuild. Badger's DropPrefix drops the tables that
// hold nothing else whole, instead of writing a tombstone per key; it
// stops the task DB's writes while it runs, and its only writer is the
// restore.
func (tdb *taskDB) wipe(id []byte, tp TopicPartition) error {
	// DropPrefix writes no delete markers: the snapshot chain ends here.
	err := tdb.endChainAround(func() error {
		return tdb.bdb.DropPrefix(withNS(nsData, id), withNS(nsIndex, id))
	})
	if err != nil {
		return err
	}
	// The applied offset goes too: a process that dies before the rebuild
	// records its first position would otherwise resume, next time, from
	// the old offset onto the emptied store (when what made it rebuild,
	// such as an offset past the end, no longer holds by then).
	return tdb.bdb.Update(func(txn *badger.Txn) error {
		for _, k := range [][]byte{metaKey(metaCut, id), metaKey(metaPosition, id), offsetKey(tp.Topic, tp.Partition)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// A paced restore fetches in smaller pieces. The client decodes a fetch on
// its own goroutines, ahead of the paced loop that applies it, so the
// pacer cannot spread that work: a restore's first 4 MiB fetch, decoded
// at once beside another restore's, stalled the instance's running tasks
// for ~150 ms right after a partition moved here (bench --failover).
const (
	restorePacedPartitionBytes = 256 << 10
	restorePacedFetchBytes     = 512 << 10
)

// consume reads the assigned partitions up to their end offsets into
// Badger.
func (db *DB) consume(ctx context.Context, tdbs []*taskDB, rebuilds map[*taskDB]bool, byTP map[TopicPartition]*restoreState,
	assign map[string]map[int32]kgo.Offset, total int64, start time.Time, opts RestoreOptions, res *RestoreResult) (int64, error) {
	partBytes, fetchBytes := int32(2<<20), int32(4<<20)
	if opts.Pace != nil {
		partBytes, fetchBytes = restorePacedPartitionBytes, restorePacedFetchBytes
	}
	copts := append(append([]kgo.Opt(nil), opts.ClientOpts...),
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxPartitionBytes(partBytes),
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	cl, err := db.newClient(copts...)
	if err != nil {
		return 0, fmt.Errorf("changelog: restore: new consumer: %w", err)
	}
	defer cl.Close()
	sinks := map[*taskDB]restoreSink{}
	dirs := make([]string, 0, len(tdbs))
	for _, tdb := range tdbs {
		dirs = append(dirs, tdb.dir)
		if rebuilds[tdb] {
			rb, err := newRebuild(tdb, db.opts.rebuildRunBytes)
			if err != nil {
				return 0, err
			}
			defer rb.cancel()
			sinks[tdb] = rb
			continue
		}
		wb := tdb.bdb.NewWriteBatch()
		defer wb.Cancel()
		sinks[tdb] = wb
	}

	var n, written int64
	var sl slab
	// The tables a restore writes stay mapped and resident; release them
	// as it goes, so they do not add up to the size of the state on top of
	// the heap (see releaseTablePages). On a timer, not per record batch:
	// a compaction faults in its input tables while writes stall.
	stopRelease := releaseTablePagesEvery(dirs, releaseInterval)
	defer stopRelease()
	remaining := total
	pace := newPacer(opts.Pace)
	lastProgress, lastLog := start, start
	phase, merged := RestorePhaseReading, int64(0)
	report := func(force bool) {
		now := time.Now()
		if opts.Progress != nil && (force || now.Sub(lastProgress) >= opts.ProgressInterval) {
			lastProgress = now
			opts.Progress(RestoreProgress{Restored: n, Remaining: remaining, Total: total,
				Elapsed: now.Sub(start), Rate: rate(n, now.Sub(start)), Rebuilt: res.Rebuilt,
				Phase: phase, Merged: merged})
		}
		if phase == RestorePhaseMerging {
			if force || now.Sub(lastLog) >= 5*time.Second {
				lastLog = now
				opts.Logger.Info("restoring", "phase", phase, "records", n, "remaining", remaining,
					"keys_written", merged)
			}
			return
		}
		if now.Sub(lastLog) >= 5*time.Second {
			lastLog = now
			r := rate(n, now.Sub(start))
			eta := "unknown"
			if r > 0 {
				eta = (time.Duration(float64(remaining) / r * float64(time.Second))).Round(time.Second).String()
			}
			opts.Logger.Info("restoring", "records", n, "remaining", remaining,
				"records_per_s", int64(r), "eta", eta)
		}
	}
	if opts.Listener != nil {
		for _, s := range sortedStates(byTP) {
			if s.pos < s.end {
				opts.Listener.OnRestoreStart(s.tp(), s.Store, s.pos, s.end)
			}
		}
	}
	// A first snapshot before reading: what is to restore is known now,
	// and a restore shorter than ProgressInterval reports it too.
	report(true)
	var ferr error
	var lastFetchWarn, lastGone time.Time
	lastMove, lastPos := time.Now(), remaining
	for remaining > 0 {
		if remaining != lastPos {
			lastMove, lastPos = time.Now(), remaining
		} else if time.Since(lastMove) > 30*time.Second {
			// Not expected to happen (the end offset is below the LSO, and
			// markers move the position); say where it stands rather than
			// wait silently until ctx ends it.
			lastMove = time.Now()
			var stuck []string
			for _, s := range byTP {
				if s.pos < s.end {
					stuck = append(stuck, fmt.Sprintf("%s at %d of %d", s.tp(), s.pos, s.end))
				}
			}
			opts.Logger.Warn("restore made no progress for 30s", "partitions", stuck)
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("changelog: restore: %w", err)
		}
		pace.resume()
		gone := false
		fs.EachError(func(t string, p int32, err error) {
			if retry.Transient(err) {
				gone = gone || topicGone(err)
				// The client retries the fetch (a broker restart, a
				// leader election); say so, at most every 5 s.
				if time.Since(lastFetchWarn) >= 5*time.Second {
					lastFetchWarn = time.Now()
					opts.Logger.Warn("restore: fetch failed, retrying", "topic", t, "partition", p, "err", err)
				}
				return
			}
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return n, fmt.Errorf("changelog: restore: %w", ferr)
		}
		if gone && time.Since(lastGone) >= time.Second {
			lastGone = time.Now()
			if err := recreatedTopic(ctx, kadm.NewClient(cl), slices.Collect(maps.Values(byTP)), opts.Logger); err != nil {
				return n, fmt.Errorf("changelog: restore: %w", err)
			}
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if ferr != nil {
				return
			}
			if err := ctx.Err(); err != nil {
				// One poll can return many batches: a cancelled restore
				// (a revocation, a shutdown) stops between them.
				ferr = err
				return
			}
			s := byTP[TopicPartition{fp.Topic, fp.Partition}]
			if s == nil || s.pos >= s.end {
				return
			}
			before, applied := s.pos, int64(0)
			// batch ends a listener's batch: a fetch can hold a whole
			// partition of small records, so it is cut every
			// restoreBatchRecords records, where the restore also checks
			// for cancellation and reports progress.
			batch := func() {
				s.restored += applied
				if opts.Listener != nil && s.pos > before {
					opts.Listener.OnBatchRestored(s.tp(), s.Store, s.pos-1, applied)
				}
				before, applied = s.pos, 0
				report(false)
			}
			for i, r := range fp.Records {
				if i > 0 && i%restoreBatchRecords == 0 {
					batch()
					if err := ctx.Err(); err != nil {
						ferr = err
						return
					}
					if err := pace.pace(ctx); err != nil {
						ferr = err
						return
					}
				}
				if r.Offset >= s.end {
					// Committed after the restore began (the task reads it
					// live); nothing below the end is left to read.
					remaining -= s.end - s.pos
					s.pos = s.end
					break
				}
				if r.Offset < s.pos {
					continue
				}
				if !r.Attrs.IsControl() {
					written += int64(len(r.Key) + len(s.dprefix) + len(r.Value))
					if err := s.apply(sinks[s.tdb], r, &sl); err != nil {
						ferr = fmt.Errorf("store %q partition %d offset %d: %w", s.Store, s.Partition, r.Offset, err)
						return
					}
					n++
					applied++
				}
				remaining -= r.Offset + 1 - s.pos
				s.pos = r.Offset + 1
			}
			batch()
			if s.pos >= s.end {
				cl.PauseFetchPartitions(map[string][]int32{s.Topic: {s.Partition}})
			}
		})
		if ferr != nil {
			return n, fmt.Errorf("changelog: restore: %w", ferr)
		}
		report(false)
		if err := pace.pace(ctx); err != nil {
			return n, fmt.Errorf("changelog: restore: %w", err)
		}
	}
	for _, tdb := range tdbs {
		switch w := sinks[tdb].(type) {
		case *badger.WriteBatch:
			if err := w.Flush(); err != nil {
				return n, fmt.Errorf("changelog: restore: write task DB %s: %w", tdb.id, err)
			}
		case *rebuild:
			// Everything is read; the merge of a large state takes
			// seconds, and without a word the last reading report
			// (records remaining) would stand for it.
			if phase != RestorePhaseMerging {
				phase = RestorePhaseMerging
				report(true)
			}
			done := merged
			w.progress = func(keys int) {
				merged = done + int64(keys)
				report(false)
			}
			if err := w.finish(ctx, pace); err != nil {
				return n, fmt.Errorf("changelog: restore: %w", err)
			}
		}
	}
	db.written.Add(written)
	releaseTablePages(dirs)
	return n, nil
}

// releaseInterval is how often a restore releases table pages: at restore
// rates, ~60 MB of tables apart.
const releaseInterval = 250 * time.Millisecond

// releaseTablePagesEvery calls releaseTablePages every d until the
// returned stop is called; stop waits for the goroutine to end.
func releaseTablePagesEvery(dirs []string, d time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				releaseTablePages(dirs)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// apply writes one changelog record into the store partition.
func (s *restoreState) apply(wb restoreSink, r *kgo.Record, sl *slab) error {
	if len(r.Key) < 1 {
		return fmt.Errorf("%w: empty changelog key", errBadKey)
	}
	if r.Key[0] == tagPosition {
		return s.applyPosition(wb, r)
	}
	kind, ok := tagKind(r.Key[0])
	if !ok {
		return fmt.Errorf("%w: unknown kind tag %q (not a tidemark changelog?)", errBadKey, r.Key[0])
	}
	if s.Kind == 0 {
		s.Kind = kind
	} else if kind != s.Kind {
		return fmt.Errorf("%w: a %s record in the changelog of a %s store", errBadKey, kind, s.Kind)
	}
	suffix := r.Key[1:]
	dkey := sl.bytes(len(s.dprefix) + len(suffix))
	copy(dkey[copy(dkey, s.dprefix):], suffix)
	var ikey []byte
	if kind != store.KindKeyValue {
		tm, err := suffixTime(kind, suffix)
		if err != nil {
			return err
		}
		if tm < s.cut {
			return nil
		}
		ikey = indexKey(s.id, tm, suffix)
	}
	if r.Value == nil {
		if err := wb.Delete(dkey); err != nil {
			return err
		}
		if ikey != nil {
			return wb.Delete(ikey)
		}
		return nil
	}
	if err := wb.SetEntry(sl.entry(dkey, r.Value)); err != nil {
		return err
	}
	if ikey != nil {
		return wb.SetEntry(sl.entry(ikey, nil))
	}
	return nil
}

// slab hands out the keys and entries of a restore from large chunks
// instead of two small allocations per record. A WriteBatch keeps both
// until its transaction is written, so chunks are never reused, only
// dropped: the garbage collector frees a chunk once every batch that
// points into it is done.
type slab struct {
	buf     []byte
	entries []badger.Entry
}

const (
	slabBytes   = 64 << 10
	slabEntries = 512
)

func (sl *slab) bytes(n int) []byte {
	if cap(sl.buf)-len(sl.buf) < n {
		sl.buf = make([]byte, 0, max(n, slabBytes))
	}
	i := len(sl.buf)
	sl.buf = sl.buf[:i+n]
	return sl.buf[i : i+n : i+n]
}

func (sl *slab) entry(key, value []byte) *badger.Entry {
	if len(sl.entries) == cap(sl.entries) {
		sl.entries = make([]badger.Entry, 0, slabEntries)
	}
	sl.entries = append(sl.entries, badger.Entry{Key: key, Value: value})
	return &sl.entries[len(sl.entries)-1]
}

// Restore brings every logged store of the task up to date; see
// DB.Restore. Call it after opening the stores and before processing, with
// an empty overlay. A large restore reopens the task's DB in restore mode
// (restoremode.go) while it writes.
func (t *TaskState) Restore(ctx context.Context, opts RestoreOptions) (RestoreResult, error) {
	if t.pending.Len() > 0 || t.flushed {
		return RestoreResult{}, fmt.Errorf("changelog: restore partition %d: overlay is not empty", t.cfg.Partition)
	}
	if t.closed {
		return RestoreResult{}, store.ErrClosed
	}
	if opts.Logger == nil {
		opts.Logger = t.log
	}
	var targets []taskTarget
	for _, st := range t.stores {
		if st.spec.Logged && !st.closed {
			targets = append(targets, taskTarget{RestoreTarget{Store: st.spec.Name, Partition: t.cfg.Partition, Topic: st.topic, Kind: st.spec.Kind,
				MinOffset: opts.MinOffsets[TopicPartition{st.topic, t.cfg.Partition}], Task: t.cfg.ID}, t.tdb})
		}
	}
	if len(targets) > 0 {
		if err := checkSpace(t.db.opts, t.db.dir, fmt.Sprintf("restore of partition %d, stores %v", t.cfg.Partition, t.storeNames())); err != nil {
			return RestoreResult{}, err
		}
	}
	t.resetSnapshot() // a reopen closes what it reads
	res, err := t.db.restore(ctx, targets, opts)
	for _, st := range t.stores {
		if id, ok := res.TopicIDs[st.topic]; ok {
			st.topicID = id
		}
	}
	t.resetSnapshot()
	if t.tdb == nil || t.tdb.bdb == nil {
		return res, err
	}
	for _, st := range t.stores {
		cut, cerr := t.tdb.readCut(st.id)
		if cerr != nil && err == nil {
			err = cerr
		}
		st.cut, st.newCut = cut, cut
	}
	return res, err
}
