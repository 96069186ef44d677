package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// WithTTL expires the rows of a table's store: a key whose last update is
// older than ttl of event time is deleted, as if a tombstone had arrived
// for it. Tables that collect keys forever (order states, availability
// per item) stay bounded by the keys updated within the last ttl.
//
//	orders.ToTable(topology.Named("order-state"), topology.WithTTL(24*time.Hour))
//
// It applies to the key-value stores of tables: Builder.Table, ToTable,
// and the tables that Count, Reduce and Aggregate of grouped streams and
// Count and Aggregate of grouped tables return. Given to any other
// operator (windowed aggregations and stream-stream joins, whose stores
// expire by retention; Deduplicate, which has its own window), it is a
// Build error, as is a ttl below 1ms (a ttl is used in whole ms, the
// rest truncated, like every event-time duration).
//
// A row's timestamp is that of its last update (for aggregations, the
// largest timestamp aggregated into it, as their outputs carry). With st
// the task's stream time, the row is expired once ts < st − ttl; it lives
// while st ≤ ts + ttl. Expiry is on stream time, never the wall clock, so
// replaying the same input expires the same rows at the same points:
//
//   - As stream time advances (before the operator processes a record,
//     and from a stream-time punctuator when other inputs of the task
//     advance it), every expired row is deleted from the store (a
//     tombstone in its changelog) and a delete is forwarded: the table's
//     change stream carries it, ToStream writes a tombstone for the key
//     with the stream time that expired it as its timestamp, and
//     aggregations downstream subtract the row, so derived state agrees
//     with the store. Rows expire in timestamp order, then key order.
//   - An update moves its key's expiry to its own timestamp + ttl.
//   - A record that would produce an already expired row is late: it is
//     dropped and counted (DropLate), as windowed aggregations drop
//     records after grace and Kafka Streams' versioned stores drop writes
//     older than their history retention. For a table that is any record,
//     value or tombstone, with ts < st − ttl: applying it would replace
//     (or delete) a live row, which is newer, with something already
//     expired. An aggregation keeps the largest timestamp, so a late
//     record still updates a live aggregate (whose expiry does not move)
//     and is dropped only when its key has none.
//   - Reads never see an expired row, even before the sweep deleted it:
//     table getters (joins) and interactive queries check the timestamp
//     against stream time (queries against the stream time the committed
//     state reflects, see ExpiringKeyValue). A Processor API operator
//     connected to the store with WithStores reads it raw; as every
//     advance of stream time sweeps at once, it holds no expired row
//     between two records.
//
// TTL on the aggregation of a grouped table (Table.GroupBy(...).Count,
// Aggregate) forgets a group's aggregate while the rows it counted may
// live on upstream: a later change of such a row subtracts from a fresh
// init(). Expire the upstream table instead, and its rows leave their
// groups as they expire.
//
// The expiry index is a second key-value store, "<store>-TTL-INDEX",
// owned by the same operator and logged like the table's store (its
// changelog "<app>-<store>-TTL-INDEX-changelog"), so with exactly-once
// processing a restored task expires exactly what its predecessor would
// have: the rows, their index and the operator's stream time are restored
// together. Sweeping costs only the rows it expires.
func WithTTL(ttl time.Duration) StoreOption {
	return storeOpt{slidingOpt{windowOpt{func(c *opConfig) { c.ttl = ttl; c.hasTTL = true }}}}
}

// The TTL index store holds, like the dedup store (dedup.go), two kinds of
// entries told apart by their first byte:
//
//	dedupIDPrefix                      → the operator's stream time (8 bytes, big-endian)
//	dedupTimePrefix time (8 bytes) key → dedupIndexValue
//
// The time index has one entry per row of the table's store, under the
// row's timestamp and its encoded key, so a sweep scans only what it
// expires. The stream time entry is what interactive queries, which read
// committed state off the record loop, check timestamps against; it is
// written as stream time advances, one changelog record per commit.
var ttlClockKey = []byte{dedupIDPrefix}

// ttlSpec is the TTL of a table operator's store: ms of event time (0: no
// TTL) and the index store's name.
type ttlSpec struct {
	ms    int64
	index string
}

// tableConfig is the opConfig of an operator that honours WithTTL.
func tableConfig(cfg *opConfig) *opConfig {
	cfg.ttlAllowed = true
	return cfg
}

// checkTTL fails the build when WithTTL was given to an operator that does
// not honour it: the option type (StoreOption) is shared with windowed
// stores, so the compiler cannot refuse it.
func (b *Builder) checkTTL(n *node, cfg *opConfig) {
	if cfg.hasTTL && cfg.versioned {
		// A table, but a versioned one: saying WithTTL does not apply to
		// tables would mislead.
		b.fail(errorf(n.name, "%w: WithTTL does not apply beside Versioned: a versioned table bounds its history by its own (Versioned's history) and keeps each key's latest value", ErrInvalidTopology))
		return
	}
	if cfg.hasTTL && !cfg.ttlAllowed {
		b.fail(errorf(n.name, "%w: WithTTL applies to the key-value stores of tables and non-windowed aggregations only, not to %s", ErrInvalidTopology, n.op))
	}
}

// addTableStore declares the timestamped key-value store of a table
// operator and, with WithTTL, its expiry index store.
func (b *Builder) addTableStore(n *node, cfg *opConfig) (string, ttlSpec) {
	name := b.addStore(n, cfg, "", kvSpec(), true)
	if !cfg.hasTTL {
		return name, ttlSpec{}
	}
	if cfg.ttl < time.Millisecond {
		b.fail(errorf(n.name, "%w: WithTTL(%v) of store %q must be at least 1ms", ErrInvalidTopology, cfg.ttl, name))
		return name, ttlSpec{}
	}
	spec := ttlSpec{ms: cfg.ttl.Milliseconds(), index: b.addStore(n, cfg, "-TTL-INDEX", kvSpec(), false)}
	if info, ok := b.stores[name]; ok {
		info.TTL, info.TTLIndex = cfg.ttl, spec.index
	}
	return name, spec
}

// ttlPunctuation is the stream-time interval of an expiring table's
// punctuator, which sweeps when other inputs of its task advance stream
// time while the table's own input is quiet (records reaching the table
// sweep first anyway). The smallest interval fires on every advance, so
// deletes are forwarded, and the stream time queries check against is
// written, as soon as stream time expires a row; when nothing is due a
// sweep costs a comparison.
const ttlPunctuation = time.Millisecond

// expiry is the task instance of an expiring table's TTL: it keeps the
// time index of the table's store and sweeps expired rows.
type expiry[K, V any] struct {
	env   *opEnv
	kv    *tsStore[K, V]
	index store.KeyValue
	ttl   int64
	next  forwarder[K, change[V]]
	// lowest is at most the smallest row timestamp in the index
	// (math.MinInt64: unknown, as after a restart), so that a sweep
	// scans only when something is due.
	lowest int64
	clock  int64 // the stream time last written to the index store
	ibuf   []byte
	due    [][]byte
}

// newExpiry starts the TTL of a table operator's store kv, or returns nil
// when the store has none.
func newExpiry[K, V any](env *opEnv, kv *tsStore[K, V], spec ttlSpec, next forwarder[K, change[V]]) (*expiry[K, V], error) {
	if spec.ms == 0 {
		return nil, nil
	}
	index, err := env.keyValue(spec.index)
	if err != nil {
		return nil, err
	}
	e := &expiry[K, V]{env: env, kv: kv, index: index, ttl: spec.ms, next: next, lowest: math.MinInt64, clock: -1}
	raw, found, err := index.Get(ttlClockKey)
	if err != nil {
		return nil, errorf(env.node, "ttl index %q: read stream time: %w", spec.index, err)
	}
	if found && len(raw) == 8 {
		e.clock = int64(binary.BigEndian.Uint64(raw))
	}
	if _, err := env.Schedule(ttlPunctuation, StreamTime, func(now int64) error {
		_, err := e.advance(now)
		return err
	}); err != nil {
		return nil, errorf(env.node, "ttl: schedule sweep: %w", err)
	}
	return e, nil
}

// advance brings the operator to stream time max(task stream time, ts),
// expiring the rows due, and returns the cut: rows and records with a
// timestamp below it are expired.
func (e *expiry[K, V]) advance(ts int64) (int64, error) {
	st := max(e.env.StreamTime(), ts, e.clock)
	if st > e.clock {
		e.clock = st
		if err := e.index.Put(ttlClockKey, binary.BigEndian.AppendUint64(nil, uint64(st))); err != nil {
			return 0, errorf(e.env.node, "ttl index: write stream time: %w", err)
		}
	}
	cut := st - e.ttl
	if cut <= e.lowest {
		return cut, nil
	}
	to := dedupTimeKey(nil, cut, "")
	e.due = e.due[:0]
	// One scan takes the rows due and the oldest row left, whose time is
	// when the next sweep is due.
	left := int64(math.MaxInt64)
	if err := e.index.Range(timeIndexFloor(e.lowest), []byte{dedupTimePrefix + 1}, func(k, _ []byte) bool {
		if bytes.Compare(k, to) < 0 {
			e.due = append(e.due, append([]byte(nil), k...))
			return true
		}
		if len(k) >= 9 {
			left = dedupKeyTime(k)
		}
		return false
	}); err != nil {
		return 0, errorf(e.env.node, "ttl index: scan: %w", err)
	}
	for _, k := range e.due {
		if err := e.expire(k, st); err != nil {
			return 0, err
		}
	}
	e.lowest = left
	return cut, nil
}

// expire deletes the row of index entry k and forwards its delete with
// timestamp st.
func (e *expiry[K, V]) expire(k []byte, st int64) error {
	if len(k) < 9 {
		return errorf(e.env.node, "corrupt ttl index key (%d bytes)", len(k))
	}
	if err := e.index.Delete(k); err != nil {
		return errorf(e.env.node, "ttl index: delete: %w", err)
	}
	kb := storeKey(k[9:])
	raw, found, err := e.kv.kv.Get(kb)
	if err != nil {
		return errorf(e.env.node, "store %q: get expiring row: %w", e.kv.name, err)
	}
	if !found {
		return errorf(e.env.node, "store %q: ttl index lists a row the store does not have", e.kv.name)
	}
	ts, vb, err := DecodeTimestamped(raw)
	if err != nil {
		return errorf(e.env.node, "store %q: expiring row: %w", e.kv.name, err)
	}
	if ts != dedupKeyTime(k) {
		return errorf(e.env.node, "store %q: ttl index time %d differs from the row's %d", e.kv.name, dedupKeyTime(k), ts)
	}
	key, err := e.kv.ks.Decode(kb)
	if err != nil {
		return errorf(e.env.node, "store %q: decode expiring key: %w", e.kv.name, err)
	}
	old, err := e.kv.vs.Decode(vb)
	if err != nil {
		return errorf(e.env.node, "store %q: decode expiring value: %w", e.kv.name, err)
	}
	if err := e.kv.kv.Delete(kb); err != nil {
		return errorf(e.env.node, "store %q: delete expired row: %w", e.kv.name, err)
	}
	return e.next.forward(Record[K, change[V]]{Key: key, Timestamp: st, Value: change[V]{oldV: old, hasOld: true}})
}

// late counts a record whose row would be expired on arrival (timestamp
// ts below cut) and reports it.
func (e *expiry[K, V]) late(ts, cut int64) bool {
	if ts >= cut {
		return false
	}
	e.env.Dropped(e.env.node, DropLate)
	return true
}

// moved keeps the index in step with a write of k's row: the row had
// timestamp oldTS (if found) and now has newTS (if kept; else it was
// deleted).
func (e *expiry[K, V]) moved(k K, oldTS int64, found bool, newTS int64, kept bool) error {
	if found && kept && oldTS == newTS {
		return nil
	}
	kb, err := e.kv.key(k)
	if err != nil {
		return err
	}
	if found {
		e.ibuf = dedupTimeKey(e.ibuf, oldTS, kb)
		if err := e.index.Delete(e.ibuf); err != nil {
			return errorf(e.env.node, "ttl index: delete: %w", err)
		}
	}
	if kept {
		e.ibuf = dedupTimeKey(e.ibuf, newTS, kb)
		if err := e.index.Put(e.ibuf, dedupIndexValue); err != nil {
			return errorf(e.env.node, "ttl index: put: %w", err)
		}
		e.lowest = min(e.lowest, newTS)
	}
	return nil
}

// ExpiringKeyValue is the view of a table's store with WithTTL that
// interactive queries read: index is the store's TTL index (info.TTLIndex),
// whose stream time, the one the state reflects, decides which rows are
// expired; Get and Range skip those, before a sweep deleted them as after.
// Without a TTL it returns kv itself.
func ExpiringKeyValue(kv store.KeyValue, index store.KeyValue, info StoreInfo) (store.KeyValue, error) {
	if info.TTL <= 0 || !info.Timestamped {
		return kv, nil
	}
	raw, found, err := index.Get(ttlClockKey)
	if err != nil {
		return nil, fmt.Errorf("store %q: read ttl stream time: %w", info.Spec.Name, err)
	}
	if !found || len(raw) != 8 {
		return kv, nil
	}
	cut := int64(binary.BigEndian.Uint64(raw)) - info.TTL.Milliseconds()
	return expiringKV{KeyValue: kv, cut: cut}, nil
}

// expiringKV hides the rows of kv whose timestamp is below cut.
type expiringKV struct {
	store.KeyValue
	cut int64
}

func (s expiringKV) live(v []byte) bool {
	ts, _, err := DecodeTimestamped(v)
	return err != nil || ts >= s.cut // a corrupt value is shown, for its decoder to report
}

func (s expiringKV) Get(key []byte) ([]byte, bool, error) {
	v, found, err := s.KeyValue.Get(key)
	if err != nil || !found || s.live(v) {
		return v, found, err
	}
	return nil, false, nil
}

func (s expiringKV) Range(from, to []byte, fn func(key, value []byte) bool) error {
	return s.KeyValue.Range(from, to, func(k, v []byte) bool {
		if !s.live(v) {
			return true
		}
		return fn(k, v)
	})
}
