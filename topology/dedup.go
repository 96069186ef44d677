package topology

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Deduplicate drops records whose id was already seen within window of
// event time, as Kafka Streams' KIP-655 proposes and its common
// deduplication-transformer example does: redelivered events (a producer
// retry, an at-least-once upstream replaying a batch) are forwarded once.
//
//	payments.Deduplicate(func(_ string, p Payment) string { return p.EventID }, time.Hour,
//		topology.Named("payment-dedup")) // store payment-dedup, changelog <app>-payment-dedup-changelog
//
// The first record with an id passes through unchanged, timestamp, key and
// headers included, and its id is remembered with its timestamp f (the
// first-seen time). A later record with the same id and timestamp ts is
// dropped, counted as DropDuplicate (reason "duplicate"), when
// |ts − f| ≤ window, in either order of the two timestamps. An id is
// remembered while the task's stream time st is at most f + window; after
// that it is forgotten (deleted from the store, a tombstone in its
// changelog) and the id passes again as a new first occurrence. So:
//
//   - A duplicate that arrives before stream time passes f + window is
//     dropped. For input in timestamp order that is every duplicate within
//     the window; out of order within the window is caught too.
//   - A duplicate that arrives later (stream time already past f + window)
//     cannot be checked and passes through: delivery of such very late
//     duplicates is at-least-once.
//   - A late record (ts < st − window) whose id is not remembered passes
//     through and is not remembered: it would be forgotten at once.
//
// The state is a key-value store mapping id → first-seen time, plus a
// time index that makes forgetting cost only the ids forgotten; it is
// logged to a changelog (WithoutChangelog, WithChangelogConfig) like any
// other store, so with exactly-once processing a crash neither forgets an
// id nor remembers one whose record was not committed. The store is named
// after the operator (Named), like the stores of aggregations; name it in
// production (RequireNamedState).
//
// The store is per task, that is per input partition: two records with the
// same id are only recognized if they land in the same partition. Derive
// the id from the key (a redelivered event has the same key as the
// original) or re-key the stream by the id first (SelectKey(id) or
// Repartition); Deduplicate itself never repartitions.
//
// Records with a null key are deduplicated like any other (only the id
// matters). Tombstones (nil values) and records whose id is "" pass through
// unchecked and are not remembered: "" means "no id", as a null id does in
// KIP-655. Records keep their own timestamps, so Deduplicate holds back no
// output watermark: it is bounded by its input, as a filter is.
func (s Stream[K, V]) Deduplicate(id func(key K, value V) string, window time.Duration, opts ...StoreOption) Stream[K, V] {
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindProcessor, "DEDUPLICATE", []*node{s.n}, cfg, nil)
	w := window.Milliseconds()
	if w <= 0 {
		s.b.fail(errorf(n.name, "%w: deduplication window %v must be at least 1ms", ErrInvalidWindow, window))
	}
	name := s.b.addStore(n, cfg, "", kvSpec(), false)
	n.impl = opFunc[K, V, K, V](func(env *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
		kv, err := env.keyValue(name)
		if err != nil {
			return nil, err
		}
		return &dedup[K, V]{env: env, next: next, kv: kv, id: id, window: w, lowest: math.MinInt64}, nil
	})
	s.n = n
	return s
}

// The dedup store holds two kinds of entries, told apart by their first
// byte:
//
//	dedupIDPrefix   id               → first-seen time (8 bytes, big-endian)
//	dedupTimePrefix time (8 bytes) id → dedupIndexValue
//
// The time index sorts by first-seen time (the sign bit flipped so that
// bytes order like int64s), so forgetting ids scans only what it deletes.
const (
	dedupIDPrefix   byte = 0
	dedupTimePrefix byte = 1
)

// dedupIndexValue is the value of index entries: not empty, since a nil
// value is a delete and an empty one is a tombstone in some clients.
var dedupIndexValue = []byte{1}

func dedupIDKey(buf []byte, id string) []byte {
	return append(append(buf[:0], dedupIDPrefix), id...)
}

// dedupTimeKey is a time index entry's key. WithTTL's expiry index (ttl.go)
// uses the same encoding, with an encoded table key as the id.
func dedupTimeKey[ID string | []byte](buf []byte, ts int64, id ID) []byte {
	buf = append(buf[:0], dedupTimePrefix)
	buf = binary.BigEndian.AppendUint64(buf, uint64(ts)^(1<<63))
	return append(buf, id...)
}

// timeIndexFloor is where a scan of a dedup or TTL time index starts when
// every entry is at or after lowest (math.MinInt64: unknown, the whole
// index). Starting at the first possible entry matters: entries deleted
// before it stay in Badger as tombstones until compaction, and a scan
// from the index's start would step over every one of them again.
func timeIndexFloor(lowest int64) []byte {
	if lowest == math.MinInt64 {
		return []byte{dedupTimePrefix}
	}
	return dedupTimeKey(nil, lowest, "")
}

// dedupKeyTime decodes the time of a time index key of at least 9 bytes.
func dedupKeyTime(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63)) }

// dedup is the task instance of Deduplicate.
type dedup[K, V any] struct {
	env    *opEnv
	next   forwarder[K, V]
	kv     store.KeyValue
	id     func(K, V) string
	window int64
	// lowest is at most the smallest first-seen time in the store
	// (math.MinInt64: unknown, as after a restart), so that forget scans
	// only when something is due.
	lowest     int64
	ikey, tkey []byte
	due        [][]byte
}

func (d *dedup[K, V]) process(r Record[K, V]) error {
	if r.Tombstone {
		return d.next.forward(r)
	}
	id := d.id(r.Key, r.Value)
	if id == "" {
		return d.next.forward(r)
	}
	st := max(d.env.StreamTime(), r.Timestamp)
	if err := d.forget(st - d.window); err != nil {
		return err
	}
	d.ikey = dedupIDKey(d.ikey, id)
	raw, found, err := d.kv.Get(d.ikey)
	if err != nil {
		return errorf(d.env.node, "get id: %w", err)
	}
	if found {
		if len(raw) != 8 {
			return errorf(d.env.node, "corrupt first-seen time of an id (%d bytes)", len(raw))
		}
		first := int64(binary.BigEndian.Uint64(raw))
		if r.Timestamp-first <= d.window && first-r.Timestamp <= d.window {
			d.env.Dropped(d.env.node, DropDuplicate)
			return nil
		}
	}
	// Not a duplicate. A remembered id is always within the window of a
	// record that is not late (forget ran above), so found here means r is
	// late: it passes through unchecked, as does a late record with a new
	// id, and neither is remembered.
	if !found && r.Timestamp >= st-d.window {
		if err := d.remember(id, r.Timestamp); err != nil {
			return err
		}
	}
	return d.next.forward(r)
}

func (d *dedup[K, V]) remember(id string, ts int64) error {
	if err := d.kv.Put(d.ikey, binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
		return errorf(d.env.node, "put id: %w", err)
	}
	d.tkey = dedupTimeKey(d.tkey, ts, id)
	if err := d.kv.Put(d.tkey, dedupIndexValue); err != nil {
		return errorf(d.env.node, "put time index: %w", err)
	}
	d.lowest = min(d.lowest, ts)
	return nil
}

// forget deletes every id first seen before cut, both of its entries.
func (d *dedup[K, V]) forget(cut int64) error {
	if cut <= d.lowest {
		return nil
	}
	to := dedupTimeKey(nil, cut, "")
	d.due = d.due[:0]
	// One scan takes the ids due and the oldest id left, whose time is
	// when the next scan is due.
	left := int64(math.MaxInt64)
	if err := d.kv.Range(timeIndexFloor(d.lowest), []byte{dedupTimePrefix + 1}, func(k, _ []byte) bool {
		if bytes.Compare(k, to) < 0 {
			d.due = append(d.due, append([]byte(nil), k...))
			return true
		}
		if len(k) >= 9 {
			left = dedupKeyTime(k)
		}
		return false
	}); err != nil {
		return errorf(d.env.node, "scan time index: %w", err)
	}
	for _, k := range d.due {
		if len(k) < 9 {
			return errorf(d.env.node, "corrupt time index key (%d bytes)", len(k))
		}
		if err := d.kv.Delete(k); err != nil {
			return errorf(d.env.node, "delete time index: %w", err)
		}
		d.ikey = append(append(d.ikey[:0], dedupIDPrefix), k[9:]...)
		if err := d.kv.Delete(d.ikey); err != nil {
			return errorf(d.env.node, "delete id: %w", err)
		}
	}
	d.lowest = left
	return nil
}
