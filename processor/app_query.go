package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// Interactive queries answer from committed state only, read from a
// snapshot of the local state off the record loop (see app_queryable.go):
// a write that may still abort is never visible, and a restore or a long
// batch on the loop does not hold a query up. Every answer carries the
// position it reflects, and AtLeast asks for a minimum one.

// Position is the input position of a query's answer: for every input
// topic partition of the stores it read, the next offset to read, i.e.
// one past the last input record the answer reflects. It is also the form
// of an AtLeast bound. See changelog.InputPosition.
type Position = changelog.InputPosition

// ErrNotLocal is returned for a key whose partition another instance owns;
// QueryResult.Owner then names it.
var ErrNotLocal = errors.New("processor: key is owned by another instance")

// ErrUnknownQueryStore is returned for a store the topology does not have.
var ErrUnknownQueryStore = errors.New("processor: no such store")

// ErrStoreKind is returned by a query of a store of another kind (Get on a
// window store, say).
var ErrStoreKind = errors.New("processor: the store is of another kind")

// ErrRestoring is returned for a key whose partition this instance owns
// but is still restoring: retry shortly.
var ErrRestoring = errors.New("processor: the key's partition is being restored here")

// ErrNoOwner is returned for a key whose partition no instance owns at the
// moment (the group is rebalancing), or while the app is not running; and
// by a query over every local partition (Range, FetchAllWindows) while a
// stream thread has no assignment (its session restarts).
var ErrNoOwner = errors.New("processor: no instance owns the key's partition")

// ErrPartitionUnknown is returned by a keyed query of a store whose input
// topic a custom partitioner writes (topology.WithPartitioner on the sink
// or repartition that feeds it), or which a sink writes windowed keys to
// (partitioned by the key inside the window, as Kafka Streams does): the
// key's partition is not the default partitioner's of the serialized key,
// and the query cannot compute it. Name it with InPartition.
var ErrPartitionUnknown = errors.New("processor: the key's partition is chosen by a custom partitioner")

// ErrNotFresh is returned when the local state did not reach an AtLeast
// bound in time; the QueryResult holds the answer from the state as it
// is, with its position.
var ErrNotFresh = errors.New("processor: the local state is behind the requested position")

// KV is one entry of a query result, still serialized.
type KV struct {
	Key, Value []byte
	// Start and End bound the window or session of an entry of a window
	// or session store, in ms since the epoch: a window is [Start, End),
	// End being Start plus the store's window size, except that a sliding
	// window's End is inclusive ([Start, End], as its topology.Windowed
	// key says); a session is [Start, End], the timestamps of its first
	// and last record. Zero for key-value stores.
	Start, End int64
}

// QueryResult answers a query.
type QueryResult struct {
	Entries []KV
	// Found is whether Get found the key, or whether any other query
	// found entries.
	Found bool
	// Partition of the key (Get, FetchWindows, FetchSessions).
	Partition int32
	// Partitions are the partitions the answer read: the key's, or every
	// queryable partition of this instance (Range, FetchAllWindows).
	Partitions []int32
	// Restoring are this instance's partitions of the store that a Range
	// or FetchAllWindows could not read because they are restoring.
	Restoring []int32
	// Truncated says a limit cut the entries short.
	Truncated bool
	// Owner is the owning instance when it is not this one.
	Owner memberInfo
	// Position is the input position of the state the answer read.
	// Input partitions whose state recorded none (restored, with the
	// group's committed offsets unknown, until the next commit) are absent.
	Position Position
	// Changelog holds the changelog offsets the state the answer read
	// reflects, by changelog topic and partition (logged stores).
	Changelog Position
}

// QueryOption qualifies a query.
type QueryOption func(*queryOptions)

type queryOptions struct {
	bound  Position
	wait   time.Duration
	tenant string
	// partition is the key's partition when hasPartition (InPartition).
	partition    int32
	hasPartition bool
}

// AtLeast answers only from state whose position covers bound on the
// partitions the query reads (the bound's other partitions are ignored,
// as Kafka Streams' PositionBound does; an input partition the state has
// no position for is not covered). If the local state is behind, the query
// waits up to wait (and ctx) for commits to bring it there, and returns
// ErrNotFresh with the answer from the state it has if they do not.
func AtLeast(bound Position, wait time.Duration) QueryOption {
	return func(o *queryOptions) { o.bound, o.wait = bound, max(wait, 0) }
}

// ForTenant names the tenant of a keyed query's key, for a store whose
// records reach it by tenant placement (its sub-topology reads a topic
// written WithPlacement): a key's partition there depends on its tenant.
// Without it such a query looks where the tenants without dedicated
// partitions keep their keys. Other stores ignore it.
func ForTenant(tenant string) QueryOption {
	return func(o *queryOptions) { o.tenant = tenant }
}

// InPartition names the partition of a keyed query's key (Get,
// FetchWindows, FetchSessions), for a store whose input a custom
// partitioner writes (topology.WithPartitioner), where the query cannot
// compute it and fails with ErrPartitionUnknown without it; or whose input
// topic another producer writes with a partitioner of its own. It takes
// precedence over ForTenant and the default partitioner. Other queries
// ignore it.
func InPartition(p int32) QueryOption {
	return func(o *queryOptions) { o.partition, o.hasPartition = p, true }
}

// queryLimit is the default and maxLimit the largest number of entries a
// query over several keys returns: a query holds the registry's read lock
// while it reads, and a session waits for it to end.
const (
	queryLimit = 1000
	maxLimit   = 100_000
)

// Get reads key from a key-value store. The key is serialized; its
// partition is the default partitioner's, as for every store written from
// a keyed stream, or its tenant placement's (see ForTenant), or the one
// InPartition names (required behind topology.WithPartitioner). It answers
// from this instance's committed state, or fails with ErrNotLocal
// (QueryResult.Owner names the owner), ErrRestoring, ErrNoOwner or
// ErrPartitionUnknown.
func (a *App) Get(ctx context.Context, storeName string, key []byte, opts ...QueryOption) (QueryResult, error) {
	return a.query(ctx, storeQuery{name: storeName, kind: store.KindKeyValue, keyed: true, key: key, opts: opts,
		read: func(st store.Store, r storeReader, res *QueryResult) error { return r.readKey(st, key, res) }})
}

// readKey is Get's read of key from a key-value store.
func (r storeReader) readKey(st store.Store, key []byte, res *QueryResult) error {
	if r.versioned {
		return r.versionedGet(st, key, res)
	}
	v, ok, err := st.(store.KeyValue).Get(key)
	if ok {
		r.add(res, KV{Key: bytes.Clone(key), Value: bytes.Clone(v)})
	}
	return err
}

// Range reads the keys in [from, to) of a key-value store (nil: unbounded)
// over this instance's queryable partitions, partition by partition, up
// to limit entries (0: 1000).
func (a *App) Range(ctx context.Context, storeName string, from, to []byte, limit int, opts ...QueryOption) (QueryResult, error) {
	return a.query(ctx, storeQuery{name: storeName, kind: store.KindKeyValue, limit: limit, opts: opts,
		read: func(st store.Store, r storeReader, res *QueryResult) error {
			if r.versioned {
				return r.versionedRange(st, from, to, res)
			}
			return st.(store.KeyValue).Range(from, to, func(k, v []byte) bool {
				return r.add(res, KV{Key: bytes.Clone(k), Value: bytes.Clone(v)})
			})
		}})
}

// FetchWindows reads the windows of key in a window store whose start is
// in [fromStart, toStart], in start order.
func (a *App) FetchWindows(ctx context.Context, storeName string, key []byte, fromStart, toStart int64, opts ...QueryOption) (QueryResult, error) {
	return a.query(ctx, storeQuery{name: storeName, kind: store.KindWindow, keyed: true, key: key, opts: opts,
		read: func(st store.Store, r storeReader, res *QueryResult) error {
			return st.(store.Window).FetchRange(key, fromStart, toStart, func(start int64, v []byte) bool {
				return r.add(res, KV{Key: bytes.Clone(key), Value: bytes.Clone(v), Start: start, End: r.windowEnd(start)})
			})
		}})
}

// FetchAllWindows reads the windows of every key in a window store whose
// start is in [fromStart, toStart], over this instance's queryable
// partitions, partition by partition (in each, by key then start), up to
// limit entries (0: 1000).
func (a *App) FetchAllWindows(ctx context.Context, storeName string, fromStart, toStart int64, limit int, opts ...QueryOption) (QueryResult, error) {
	return a.query(ctx, storeQuery{name: storeName, kind: store.KindWindow, limit: limit, opts: opts,
		read: func(st store.Store, r storeReader, res *QueryResult) error {
			return st.(store.Window).FetchAll(fromStart, toStart, func(k []byte, start int64, v []byte) bool {
				return r.add(res, KV{Key: bytes.Clone(k), Value: bytes.Clone(v), Start: start, End: r.windowEnd(start)})
			})
		}})
}

// FetchSessions reads the sessions of key in a session store that overlap
// [from, to] (end ≥ from and start ≤ to; math.MinInt64 and math.MaxInt64
// for all of them), ordered by end then start.
func (a *App) FetchSessions(ctx context.Context, storeName string, key []byte, from, to int64, opts ...QueryOption) (QueryResult, error) {
	return a.query(ctx, storeQuery{name: storeName, kind: store.KindSession, keyed: true, key: key, opts: opts,
		read: func(st store.Store, r storeReader, res *QueryResult) error {
			return st.(store.Session).FindSessions(key, from, to, func(start, end int64, v []byte) bool {
				return r.add(res, KV{Key: bytes.Clone(key), Value: bytes.Clone(v), Start: start, End: end})
			})
		}})
}

// storeQuery is one query: of a key (keyed: its partition), or of every
// queryable partition.
type storeQuery struct {
	name  string
	kind  store.Kind
	keyed bool
	key   []byte
	limit int // entries; a keyed query's is maxLimit
	opts  []QueryOption
	// read reads the store of one partition into res, with r.add.
	read func(st store.Store, r storeReader, res *QueryResult) error
}

// storeReader is what a storeQuery's read gets for one partition.
type storeReader struct {
	windowSize int64
	limit      int
	versioned  bool // a versioned table's store: see app_query_versioned.go
}

func (r storeReader) windowEnd(start int64) int64 {
	if start > math.MaxInt64-r.windowSize {
		return math.MaxInt64
	}
	return start + r.windowSize
}

// add appends e to res unless the limit is reached, which it reports as
// false and Truncated.
func (r storeReader) add(res *QueryResult, e KV) bool {
	if len(res.Entries) >= r.limit {
		res.Truncated = true
		return false
	}
	res.Entries = append(res.Entries, e)
	return true
}

// pollFresh is how often a query bounded by AtLeast looks again at the
// local state while it waits for it.
const pollFresh = 20 * time.Millisecond

// snapshotWait bounds how long one look waits for a staged Apply to
// finish (changelog.DB.Snapshot).
const snapshotWait = 5 * time.Second

func (a *App) query(ctx context.Context, q storeQuery) (QueryResult, error) {
	var o queryOptions
	for _, opt := range q.opts {
		opt(&o)
	}
	switch {
	case q.keyed:
		q.limit = maxLimit
	case q.limit <= 0:
		q.limit = queryLimit
	}
	q.limit = min(q.limit, maxLimit)
	if res, ok, err := a.queryGlobal(ctx, q, o); ok {
		return res, err
	}
	info, sub, err := a.queryStore(q.name, q.kind)
	if err != nil {
		return QueryResult{}, err
	}
	deadline := time.Now().Add(o.wait)
	for {
		res, parts, err := a.readCommitted(ctx, q, o, info, sub)
		if errors.Is(err, errElsewhere) {
			return a.elsewhere(ctx, res)
		}
		if err != nil || covers(res.Position, o.bound, parts) {
			return res, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return res, fmt.Errorf("%w: store %q is at %s, want at least %s", ErrNotFresh, q.name, res.Position, o.bound)
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("%w: store %q is at %s, want at least %s: %w", ErrNotFresh, q.name, res.Position, o.bound, ctx.Err())
		case <-time.After(min(wait, pollFresh)):
		}
	}
}

// errElsewhere: the key's partition is not this instance's.
var errElsewhere = errors.New("partition not local")

// readCommitted answers q once from a snapshot of the committed state, and
// returns the partitions it read.
func (a *App) readCommitted(ctx context.Context, q storeQuery, o queryOptions, info topology.StoreInfo, sub int) (QueryResult, []int32, error) {
	res := QueryResult{Position: Position{}, Changelog: Position{}}
	v, done := a.iq.read(sub)
	defer done()
	parts := v.queryable
	if q.keyed {
		p, err := a.keyPartition(sub, q.key, o, v.partitions)
		if err != nil {
			return res, nil, fmt.Errorf("processor: query %q: %w", q.name, err)
		}
		res.Partition = p
		switch {
		case slices.Contains(v.queryable, res.Partition):
			if err := a.outOfContact(v.thread[res.Partition], res.Partition, time.Now()); err != nil {
				return res, nil, fmt.Errorf("processor: query %q: %w", q.name, err)
			}
			parts = []int32{res.Partition}
		case slices.Contains(v.restoring, res.Partition):
			return res, nil, fmt.Errorf("%w: store %q partition %d", ErrRestoring, q.name, res.Partition)
		default:
			return res, nil, errElsewhere
		}
	} else {
		if v.live < len(a.threads) {
			// Answering from the other threads' partitions would
			// leave this thread's out without a word.
			return res, nil, fmt.Errorf("%w: query %q: a stream thread has no assignment (its session is restarting, or the app is not running)", ErrNoOwner, q.name)
		}
		now := time.Now()
		for _, p := range v.queryable {
			// As above: its partitions may be others' by now.
			if err := a.outOfContact(v.thread[p], p, now); err != nil {
				return res, nil, fmt.Errorf("processor: query %q: %w", q.name, err)
			}
		}
		res.Restoring = v.restoring
	}
	if len(parts) == 0 {
		return res, nil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, snapshotWait)
	defer cancel()
	snap, err := v.db.Snapshot(sctx)
	if err != nil {
		return res, nil, fmt.Errorf("processor: query %q: %w", q.name, err)
	}
	defer snap.Close()
	r := storeReader{windowSize: info.Spec.WindowSize, limit: q.limit, versioned: info.Versioned}
	for _, p := range parts {
		if res.Truncated {
			break
		}
		res.Partitions = append(res.Partitions, p)
		if err := readPartition(snap, q, info, p, r, &res); err != nil {
			return res, nil, fmt.Errorf("processor: query %q partition %d: %w", q.name, p, err)
		}
	}
	res.Found = len(res.Entries) > 0
	return res, res.Partitions, nil
}

// keyPartition is the partition of key among the n tasks of sub-topology
// sub: the one InPartition names; the tenant placement's (for o.tenant)
// when the sub-topology reads a placed topic (Build makes a join's placed
// inputs agree); ErrPartitionUnknown when it reads a topic a custom
// partitioner writes; the default partitioner's otherwise.
func (a *App) keyPartition(sub int, key []byte, o queryOptions, n int32) (int32, error) {
	if o.hasPartition {
		if o.partition < 0 || o.partition >= n {
			return 0, fmt.Errorf("%w: partition %d: the store has partitions 0 to %d", errBadParam, o.partition, n-1)
		}
		return o.partition, nil
	}
	topics := a.topo.SubTopologies()[sub].SourceTopics
	placements := a.topo.Placements()
	for _, topic := range topics {
		if p, ok := placements[topic]; ok {
			return p.Partition(o.tenant, key, n)
		}
	}
	partitioned := a.topo.PartitionedTopics()
	for _, topic := range topics {
		if partitioned[topic] {
			return 0, fmt.Errorf("%w: topic %s, which feeds the store, is written with topology.WithPartitioner or holds windowed keys; "+
				"name the key's partition with InPartition (?partition= over HTTP)", ErrPartitionUnknown, topic)
		}
	}
	return task.DefaultPartition(key, n), nil
}

// readPartition reads partition p of q's store into res, with the
// position and changelog offset that partition's state reflects.
func readPartition(snap *changelog.Snapshot, q storeQuery, info topology.StoreInfo, p int32, r storeReader, res *QueryResult) error {
	pos, _, err := snap.Position(q.name, p)
	if err != nil {
		return err
	}
	res.Position.Merge(pos)
	if info.Changelog != "" {
		applied, found, err := snap.AppliedOffset(changelog.TopicPartition{Topic: info.Changelog, Partition: p})
		if err != nil {
			return err
		}
		if found {
			res.Changelog.Set(info.Changelog, p, applied.Offset)
		}
	}
	var st store.Store
	switch q.kind {
	case store.KindWindow:
		st, err = snap.Window(q.name, p)
	case store.KindSession:
		st, err = snap.Session(q.name, p)
	default:
		st, err = snap.KeyValue(q.name, p)
		if err == nil && info.TTL > 0 { // WithTTL: expired rows are not answered, swept or not
			var index store.KeyValue
			if index, err = snap.KeyValue(info.TTLIndex, p); err == nil {
				st, err = topology.ExpiringKeyValue(st.(store.KeyValue), index, info)
			}
		}
	}
	if err != nil {
		return err
	}
	return q.read(st, r, res)
}

// covers reports whether pos covers bound on partitions parts.
func covers(pos, bound Position, parts []int32) bool {
	need := Position{}
	for topic, ps := range bound {
		for p, off := range ps {
			if slices.Contains(parts, p) {
				need.Set(topic, p, off)
			}
		}
	}
	return pos.Covers(need)
}

// elsewhere answers for a key whose partition this instance does not
// have: ErrNotLocal naming the owner, ErrRestoring if the group gave it
// here already (the session has not seen it yet), ErrNoOwner if no one
// has it.
func (a *App) elsewhere(ctx context.Context, res QueryResult) (QueryResult, error) {
	res.Position, res.Changelog = nil, nil
	if !a.running.Load() {
		return res, fmt.Errorf("%w: partition %d: the app is not running", ErrNoOwner, res.Partition)
	}
	owner, err := a.owner(ctx, res.Partition)
	switch {
	case err != nil && !a.running.Load():
		// Run returned meanwhile and closed the client the lookup used.
		return res, fmt.Errorf("%w: partition %d: the app is not running", ErrNoOwner, res.Partition)
	case err != nil:
		return res, fmt.Errorf("%w: partition %d: %v", ErrNoOwner, res.Partition, err)
	case owner.Instance == a.cfg.InstanceID:
		return res, fmt.Errorf("%w: partition %d is moving to or from this instance", ErrRestoring, res.Partition)
	}
	res.Owner = owner
	return res, fmt.Errorf("%w: partition %d is on instance %q", ErrNotLocal, res.Partition, owner.Instance)
}

// queryStore returns the store name of the topology, which must be of
// kind, and its sub-topology, once a session has published the layout.
func (a *App) queryStore(name string, kind store.Kind) (topology.StoreInfo, int, error) {
	info, ok := a.topo.Store(name)
	if !ok {
		return info, 0, fmt.Errorf("%w: %q", ErrUnknownQueryStore, name)
	}
	if info.Spec.Kind != kind {
		return info, 0, fmt.Errorf("%w: %q is a %s store, not a %s store", ErrStoreKind, name, info.Spec.Kind, kind)
	}
	for i, sub := range a.topo.SubTopologies() {
		for _, spec := range sub.Stores {
			if spec.Name != name {
				continue
			}
			if _, ok := a.iq.partitions(i); !ok {
				return info, 0, fmt.Errorf("%w: the app is not running", ErrNoOwner)
			}
			return info, i, nil
		}
	}
	return info, 0, fmt.Errorf("%w: %q", ErrUnknownQueryStore, name)
}

// owner finds the instance that owns partition p from the group's current
// assignment and the instance info in each member's join metadata.
func (a *App) owner(ctx context.Context, p int32) (memberInfo, error) {
	g, err := a.describeGroup(ctx)
	if err != nil {
		return memberInfo{}, fmt.Errorf("processor: %w", err)
	}
	for _, m := range g.Members {
		asg, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range asg.Topics {
			if slices.Contains(t.Partitions, p) {
				if info, ok := memberInfoOf(m); ok {
					return info, nil
				}
			}
		}
	}
	return memberInfo{}, fmt.Errorf("processor: no member owns partition %d", p)
}
