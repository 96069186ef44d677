package topology

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// ErrSuppressBufferFull is wrapped by the error of a Suppress whose
// BufferConfig says ShutDownWhenFull when its buffer is over capacity: the
// task fails (the transaction aborts), as Kafka Streams' shutDownWhenFull
// does, rather than emit an update before its time.
var ErrSuppressBufferFull = errors.New("suppression buffer full")

// BufferConfig bounds the buffer of a Suppress. Both bounds count the
// updates buffered in one task (one input partition), not in the whole
// application.
type BufferConfig struct {
	// MaxRecords is the most keys buffered at once; 0: unbounded.
	MaxRecords int
	// MaxBytes is the most bytes buffered at once, an entry counting the
	// bytes of its key, its old and new values (as the table's serdes
	// encode them) and its headers' keys and values; 0: unbounded.
	MaxBytes int64
	// ShutDownWhenFull fails the task (an error naming the operator,
	// wrapping ErrSuppressBufferFull) when the buffer is over capacity,
	// instead of emitting the oldest updates early (the default, Kafka
	// Streams' emitEarlyWhenFull).
	ShutDownWhenFull bool
}

// Suppression says how Table.Suppress holds back a table's updates. The
// only one is UntilTimeLimit; the final results of windowed aggregations
// (Kafka Streams' untilWindowCloses) are the EmitFinal option of the
// aggregation itself.
type Suppression struct {
	limit time.Duration
	buf   BufferConfig
	ok    bool // made by UntilTimeLimit, not the zero value
}

// UntilTimeLimit holds each key's update back for limit of event time
// after the key entered the buffer, keeping only the key's latest update,
// within the bounds of buf (Kafka Streams' Suppressed.untilTimeLimit). See
// Table.Suppress.
func UntilTimeLimit(limit time.Duration, buf BufferConfig) Suppression {
	return Suppression{limit: limit, buf: buf, ok: true}
}

// Suppress rate-limits the table's updates per key, as Kafka Streams'
// suppress(untilTimeLimit(limit, buffer)) does: at most one update of a key
// per limit of event time reaches downstream operators, and it is the
// key's latest value.
//
//	availability.Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{MaxRecords: 100_000}),
//		topology.Named("availability-1s")) // store availability-1s, changelog <app>-availability-1s-changelog
//
// An update of key k (a new value or a delete) is buffered. If k is
// already buffered, the update replaces the buffered one but keeps the
// time k entered the buffer: the timestamp of its first buffered update, t.
// Let st be the operator's stream time, the largest timestamp of the
// updates it has received. The buffered update of k is emitted once
// st ≥ t + limit, with the timestamp and headers of k's latest update and,
// as the old value, k's value before its first buffered update (what
// downstream saw last), so that aggregations downstream subtract the right
// value. (Kafka Streams 4.1 emits the old value of k's latest update
// instead, BufferValue.oldValue: a deliberate difference, in README.) Due updates go out in order of t, then of the encoded key.
//
// Emission is driven by records only, as in Kafka Streams: the check runs
// whenever an update reaches the operator, after buffering it, so an
// update that is already due (limit 0, or a timestamp at least limit
// behind st) goes out at once. There is no wall-clock punctuation: when no
// update arrives, stream time stands still and buffered updates wait,
// however much wall-clock time passes. Records that do not reach the
// operator (other inputs of the task, updates upstream operators drop) do
// not move its stream time either.
//
// Deletes are buffered and emitted like updates: a key deleted within the
// limit is emitted as one delete. A key that did not exist before its
// first buffered update and was deleted since is emitted as a delete too
// (downstream may never have seen the key), as Kafka Streams does.
//
// The buffer is bounded by buf. When an update leaves it over capacity
// (more than MaxRecords keys or MaxBytes bytes), the oldest buffered keys
// (by t) are emitted early until it is within bounds; with
// ShutDownWhenFull the operator fails the task instead, with an error
// naming it and wrapping ErrSuppressBufferFull.
//
// The buffer is a key-value store named after the operator (Named), logged
// to a changelog (WithoutChangelog, WithChangelogConfig) like the stores of
// aggregations, and the operator's stream time is kept across restarts
// with the other operator clocks; so with exactly-once processing a
// restart neither loses a buffered update nor emits one twice. Name it in
// production (RequireNamedState). Each buffered key costs three store
// entries: its update, and its place in two time indexes (by entry time,
// to emit; by latest timestamp, for the output watermark).
//
// Output watermarks (OutputBounds) account for the delay: a sink after
// Suppress is covered up to min(the input's bound, the smallest timestamp
// still buffered − 1), so a key held back holds the watermark back.
//
// The suppressed table is computed on read for operators that look it up
// (joins): as in Kafka Streams, a buffered key reads as its value before
// its first buffered update, what downstream saw last (its timestamp is
// unknown: −1), and any other key reads through to the upstream table.
// The table is not materialized: StoreName is "", and the buffer store
// holds only buffered updates.
//
// For final results of windowed aggregations (Kafka Streams'
// suppress(untilWindowCloses(...))) use the aggregation's EmitFinal option,
// not Suppress. Suppress on a windowed table is UntilTimeLimit per
// (key, window), like Kafka Streams'.
func (t Table[K, V]) Suppress(s Suppression, opts ...StoreOption) Table[K, V] {
	cfg := newOpConfig(opts)
	n := t.b.addNode(KindProcessor, "SUPPRESS", []*node{t.n}, cfg, nil)
	limit := s.limit.Milliseconds()
	switch {
	case !s.ok:
		t.b.fail(errorf(n.name, "%w: suppression is the zero value; use UntilTimeLimit", ErrInvalidTopology))
	case s.limit < 0 || (s.limit > 0 && limit == 0):
		t.b.fail(errorf(n.name, "%w: suppression time limit %v must be 0 or at least 1ms", ErrInvalidTopology, s.limit))
	case s.buf.MaxRecords < 0 || s.buf.MaxBytes < 0:
		t.b.fail(errorf(n.name, "%w: suppression buffer bounds %d records, %d bytes must not be negative (0: unbounded)",
			ErrInvalidTopology, s.buf.MaxRecords, s.buf.MaxBytes))
	}
	name := t.b.addStore(n, cfg, "", kvSpec(), false)
	if t.ks == nil {
		t.b.fail(errorf(n.name, "%w: key serde for store %q", ErrMissingSerde, name))
	}
	if t.vs == nil {
		t.b.fail(errorf(n.name, "%w: value serde for store %q", ErrMissingSerde, name))
	}
	ks, vs, buf := t.ks, t.vs, s.buf
	n.impl = suppressOp[K, V]{name: name, opFunc: func(env *opEnv, next forwarder[K, change[V]]) (receiver[K, change[V]], error) {
		kv, err := env.keyValue(name)
		if err != nil {
			return nil, err
		}
		sp := &suppress[K, V]{env: env, next: next, kv: kv, ks: ks, vs: vs, limit: limit, buf: buf, lowest: math.MinInt64, held: math.MaxInt64}
		sp.observed = operatorClock(env, name, func() int64 { return sp.observed })
		// The held clock is recomputed from the store, not restored.
		operatorClock(env, name+suppressHeldClock, sp.heldClock)
		return sp, nil
	}}
	up := t.src
	src := &funcGetters[K, V]{stores: append([]string{name}, up.storeNames()...), mk: func(env *opEnv) (getter[K, V], error) {
		g, err := up.newGetter(env)
		if err != nil {
			return nil, err
		}
		kv, err := env.keyValue(name)
		if err != nil {
			return nil, err
		}
		var kbuf []byte
		return getterFunc[K, V](func(k K) (v V, ts int64, found bool, err error) {
			if kbuf, err = ks.Encode(kbuf[:0], k); err != nil {
				return v, 0, false, errorf(env.node, "suppressed table %q: encode key: %w", name, err)
			}
			kbuf = suppressKeyKey(kbuf)
			raw, buffered, err := kv.Get(kbuf)
			if err != nil {
				return v, 0, false, errorf(env.node, "suppressed table %q: get: %w", name, err)
			}
			if !buffered {
				return g.get(k)
			}
			e, err := decodeSuppressEntry(raw)
			if err == nil && e.hasPrior {
				v, err = vs.Decode(e.prior)
			}
			if err != nil {
				return v, 0, false, errorf(env.node, "suppressed table %q: decode buffered entry: %w", name, err)
			}
			return v, -1, e.hasPrior, nil
		}), nil
	}}
	return Table[K, V]{b: t.b, n: n, ks: ks, vs: vs, src: src}
}

// The suppress buffer store holds three kinds of entries, told apart by
// their first byte:
//
//	suppressKeyPrefix  key                          → suppressEntry (encodeSuppressEntry)
//	suppressTimePrefix entry time (8 bytes) key       → suppressIndexValue
//	suppressHeldPrefix latest timestamp (8 bytes) key → suppressIndexValue
//
// The time index sorts keys by the time they entered the buffer (the sign
// bit flipped so that bytes order like int64s), so emitting due or oldest
// keys scans only what it emits. The held index sorts them by the
// timestamp they will be emitted with, so the smallest one, which bounds
// the operator's output watermark (suppressOp.outputBound), is one seek
// away.
const (
	suppressKeyPrefix  byte = 0
	suppressTimePrefix byte = 1
	suppressHeldPrefix byte = 2
)

// suppressHeldClock suffixes the store name to name the operator clock
// holding the smallest timestamp buffered (ClockKeeper). Other clocks are
// named after stores, and a logged store's name has no '/' (its changelog
// topic could not), so they cannot take this name.
const suppressHeldClock = "/held"

// suppressOp is the node of a Suppress: its instances, and its output
// bound. Records leave a Suppress later than they arrive, with the
// timestamp of their key's latest update, so its output is bounded by its
// input (future updates) and by the smallest timestamp still buffered, H:
// W = min(parent, H − 1), no constraint from H when the buffer is empty.
// A new update in the claim (timestamp above the parent's bound) never
// moves W back.
type suppressOp[K, V any] struct {
	opFunc[K, change[V], K, change[V]]
	name string
}

func (o suppressOp[K, V]) clockName() string { return o.name }

func (o suppressOp[K, V]) outputBound(parent *boundExpr) *boundExpr {
	return minOf(parent, &boundExpr{op: boundHeld, clock: o.name + suppressHeldClock})
}

// suppressIndexValue is the value of index entries: not empty, since a nil
// value is a delete.
var suppressIndexValue = []byte{1}

// suppressKeyKey turns an encoded key, in place, into its entry's store
// key.
func suppressKeyKey(encoded []byte) []byte {
	encoded = append(encoded, 0)
	copy(encoded[1:], encoded)
	encoded[0] = suppressKeyPrefix
	return encoded
}

func suppressTimeKey(buf []byte, t int64, key []byte) []byte {
	return suppressIndexKey(buf, suppressTimePrefix, t, key)
}

func suppressIndexKey(buf []byte, prefix byte, t int64, key []byte) []byte {
	buf = append(buf[:0], prefix)
	buf = binary.BigEndian.AppendUint64(buf, uint64(t)^(1<<63))
	return append(buf, key...)
}

// suppressEntry is a buffered update: the time its key entered the buffer,
// the key's value before that (prior: what downstream saw last), and its
// latest update (value, timestamp, headers).
type suppressEntry struct {
	entered, ts     int64
	hasPrior        bool
	hasNew          bool
	prior, newValue []byte
	headers         []Header
}

// size is what the entry counts against BufferConfig.MaxBytes, given its
// encoded key's length.
func (e *suppressEntry) size(keyLen int) int64 {
	n := keyLen + len(e.prior) + len(e.newValue)
	for _, h := range e.headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// encodeSuppressEntry appends e to dst: entered and ts (8 bytes each,
// big-endian), a flag byte (1: has a prior value, 2: has a new value), the
// prior and new values (uvarint length, bytes), the header count (uvarint)
// and each header (uvarint key length, key, uvarint value length + 1 with
// 0 for a null value, value).
func encodeSuppressEntry(dst []byte, e *suppressEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.entered))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
	var flags byte
	if e.hasPrior {
		flags |= 1
	}
	if e.hasNew {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(e.prior)))
	dst = append(dst, e.prior...)
	dst = binary.AppendUvarint(dst, uint64(len(e.newValue)))
	dst = append(dst, e.newValue...)
	dst = binary.AppendUvarint(dst, uint64(len(e.headers)))
	for _, h := range e.headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		if h.Value == nil {
			dst = binary.AppendUvarint(dst, 0)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(h.Value))+1)
		dst = append(dst, h.Value...)
	}
	return dst
}

var errCorruptSuppressEntry = errors.New("corrupt suppression buffer entry")

// decodeSuppressEntry decodes an entry; its byte slices are copies, so the
// entry outlives b.
func decodeSuppressEntry(b []byte) (suppressEntry, error) {
	var e suppressEntry
	if len(b) < 17 {
		return e, fmt.Errorf("%w: %d bytes", errCorruptSuppressEntry, len(b))
	}
	e.entered = int64(binary.BigEndian.Uint64(b))
	e.ts = int64(binary.BigEndian.Uint64(b[8:]))
	e.hasPrior, e.hasNew = b[16]&1 != 0, b[16]&2 != 0
	b = b[17:]
	next := func(nullable bool) ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, false
		}
		b = b[w:]
		if nullable {
			if n == 0 {
				return nil, true
			}
			n--
		}
		if uint64(len(b)) < n {
			return nil, false
		}
		v := bytes.Clone(b[:n])
		if v == nil {
			v = []byte{}
		}
		b = b[n:]
		return v, true
	}
	var ok bool
	if e.prior, ok = next(false); !ok {
		return e, fmt.Errorf("%w: prior value", errCorruptSuppressEntry)
	}
	if e.newValue, ok = next(false); !ok {
		return e, fmt.Errorf("%w: new value", errCorruptSuppressEntry)
	}
	nh, w := binary.Uvarint(b)
	if w <= 0 || nh > uint64(len(b)) {
		return e, fmt.Errorf("%w: header count", errCorruptSuppressEntry)
	}
	b = b[w:]
	for range nh {
		k, ok1 := next(false)
		v, ok2 := next(true)
		if !ok1 || !ok2 {
			return e, fmt.Errorf("%w: header", errCorruptSuppressEntry)
		}
		e.headers = append(e.headers, Header{Key: string(k), Value: v})
	}
	return e, nil
}

// suppress is the task instance of Table.Suppress.
type suppress[K, V any] struct {
	env   *opEnv
	next  forwarder[K, change[V]]
	kv    store.KeyValue
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	limit int64
	buf   BufferConfig
	// observed is the operator's stream time, as in Kafka Streams: the
	// largest timestamp of the updates it has received (kept across
	// restarts as an operator clock).
	observed int64
	// loaded says records and bytes were counted from the store (lazily,
	// so a restored buffer is counted once, after restore).
	loaded         bool
	records, bytes int64
	// lowest is at most the smallest entry time in the buffer
	// (math.MinInt64: unknown), so that emitDue scans only when something
	// may be due.
	lowest int64
	// held is the smallest timestamp buffered (math.MaxInt64: none), exact
	// after every record; heldStale says it must be read from the held
	// index again.
	held       int64
	heldStale  bool
	kbuf, vbuf []byte
	tkey, ekey []byte
}

// heldClock is the held operator clock: math.MinInt64 (no claim) until the
// buffer restored from the changelog was counted, math.MaxInt64 when it is
// empty.
func (s *suppress[K, V]) heldClock() int64 {
	if !s.loaded {
		return math.MinInt64
	}
	return s.held
}

func (s *suppress[K, V]) process(r Record[K, change[V]]) error {
	if !s.loaded {
		if err := s.load(); err != nil {
			return err
		}
	}
	s.observed = max(s.observed, r.Timestamp)
	if err := s.buffer(r); err != nil {
		return err
	}
	if err := s.emitDue(s.observed - s.limit); err != nil {
		return err
	}
	for s.overCapacity() {
		if s.buf.ShutDownWhenFull {
			return errorf(s.env.node, "%w: %d/%d records, %d/%d bytes buffered (ShutDownWhenFull)",
				ErrSuppressBufferFull, s.records, s.buf.MaxRecords, s.bytes, s.buf.MaxBytes)
		}
		if err := s.emitOldest(); err != nil {
			return err
		}
	}
	if s.heldStale {
		return s.readHeld()
	}
	return nil
}

// timeFloor is where a scan of the time index starts: at lowest, before
// which there are no entries, only the tombstones of those emitted (Badger
// keeps them until compaction; scanning from the index's start would step
// over each of them again at every emission).
func (s *suppress[K, V]) timeFloor() []byte {
	if s.lowest == math.MinInt64 {
		return []byte{suppressTimePrefix}
	}
	return suppressTimeKey(nil, s.lowest, nil)
}

// readHeld sets held from the held index. A stale held is still at most
// every timestamp buffered (it only ever decreases between reads), so once
// the buffer was loaded the scan starts there, past the tombstones of
// the held entries replaced before it.
func (s *suppress[K, V]) readHeld() error {
	from := []byte{suppressHeldPrefix}
	if s.loaded && s.held != math.MaxInt64 {
		from = suppressIndexKey(nil, suppressHeldPrefix, s.held, nil)
	}
	held := int64(math.MaxInt64)
	if err := s.kv.Range(from, []byte{suppressHeldPrefix + 1}, func(k, _ []byte) bool {
		if len(k) >= 9 {
			held = int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
		}
		return false
	}); err != nil {
		return errorf(s.env.node, "scan held index: %w", err)
	}
	s.held, s.heldStale = held, false
	return nil
}

func (s *suppress[K, V]) overCapacity() bool {
	return (s.buf.MaxRecords > 0 && s.records > int64(s.buf.MaxRecords)) || (s.buf.MaxBytes > 0 && s.bytes > s.buf.MaxBytes)
}

// load counts the buffered records and bytes.
func (s *suppress[K, V]) load() error {
	var derr error
	err := s.kv.Range([]byte{suppressKeyPrefix}, []byte{suppressKeyPrefix + 1}, func(k, v []byte) bool {
		e, err := decodeSuppressEntry(v)
		if err != nil {
			derr = err
			return false
		}
		s.records++
		s.bytes += e.size(len(k) - 1)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return errorf(s.env.node, "count buffered updates: %w", err)
	}
	if err := s.readHeld(); err != nil {
		return err
	}
	s.loaded = true
	return nil
}

// buffer puts r's update into the buffer, replacing the key's buffered
// update but keeping its entry time and prior value.
func (s *suppress[K, V]) buffer(r Record[K, change[V]]) error {
	var err error
	if s.kbuf, err = s.ks.Encode(s.kbuf[:0], r.Key); err != nil {
		return errorf(s.env.node, "encode key: %w", err)
	}
	keyLen := len(s.kbuf)
	s.ekey = suppressKeyKey(append(s.ekey[:0], s.kbuf...))
	raw, found, err := s.kv.Get(s.ekey)
	if err != nil {
		return errorf(s.env.node, "get buffered update: %w", err)
	}
	var e suppressEntry
	if found {
		if e, err = decodeSuppressEntry(raw); err != nil {
			return errorf(s.env.node, "%w", err)
		}
		s.bytes -= e.size(keyLen)
		if err := s.unhold(e.ts, s.kbuf); err != nil {
			return err
		}
	} else {
		e.entered = r.Timestamp
		if e.hasPrior = r.Value.hasOld; e.hasPrior {
			if e.prior, err = s.vs.Encode(nil, r.Value.oldV); err != nil {
				return errorf(s.env.node, "encode old value: %w", err)
			}
		}
		s.tkey = suppressTimeKey(s.tkey, e.entered, s.kbuf)
		if err := s.kv.Put(s.tkey, suppressIndexValue); err != nil {
			return errorf(s.env.node, "put time index: %w", err)
		}
		s.records++
		s.lowest = min(s.lowest, e.entered)
	}
	e.ts, e.headers, e.hasNew, e.newValue = r.Timestamp, r.Headers, r.Value.hasNew, nil
	s.tkey = suppressIndexKey(s.tkey, suppressHeldPrefix, e.ts, s.kbuf)
	if err := s.kv.Put(s.tkey, suppressIndexValue); err != nil {
		return errorf(s.env.node, "put held index: %w", err)
	}
	s.held = min(s.held, e.ts)
	if e.hasNew {
		if e.newValue, err = s.vs.Encode(nil, r.Value.newV); err != nil {
			return errorf(s.env.node, "encode new value: %w", err)
		}
	}
	s.bytes += e.size(keyLen)
	s.vbuf = encodeSuppressEntry(s.vbuf[:0], &e)
	if err := s.kv.Put(s.ekey, s.vbuf); err != nil {
		return errorf(s.env.node, "put buffered update: %w", err)
	}
	return nil
}

// unhold removes the held index entry of a key buffered with timestamp ts.
func (s *suppress[K, V]) unhold(ts int64, key []byte) error {
	s.tkey = suppressIndexKey(s.tkey, suppressHeldPrefix, ts, key)
	if err := s.kv.Delete(s.tkey); err != nil {
		return errorf(s.env.node, "delete held index: %w", err)
	}
	if ts == s.held {
		s.heldStale = true
	}
	return nil
}

// emitDue emits every buffered key that entered the buffer at or before
// cut, in index order.
func (s *suppress[K, V]) emitDue(cut int64) error {
	if cut < s.lowest {
		return nil
	}
	var due [][]byte
	to := suppressTimeKey(nil, cut+1, nil)
	// One scan takes the due keys and the oldest key left, whose time is
	// when the next scan is due.
	left := int64(math.MaxInt64)
	if err := s.kv.Range(s.timeFloor(), []byte{suppressTimePrefix + 1}, func(k, _ []byte) bool {
		if bytes.Compare(k, to) < 0 {
			due = append(due, bytes.Clone(k))
			return true
		}
		if len(k) >= 9 {
			left = int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
		}
		return false
	}); err != nil {
		return errorf(s.env.node, "scan time index: %w", err)
	}
	for _, k := range due {
		if err := s.emit(k); err != nil {
			return err
		}
	}
	s.lowest = left
	return nil
}

// emitOldest emits the key that entered the buffer first.
func (s *suppress[K, V]) emitOldest() error {
	var oldest []byte
	if err := s.kv.Range(s.timeFloor(), []byte{suppressTimePrefix + 1}, func(k, _ []byte) bool {
		oldest = bytes.Clone(k)
		return false
	}); err != nil {
		return errorf(s.env.node, "scan time index: %w", err)
	}
	if oldest == nil {
		return errorf(s.env.node, "buffer over capacity (%d records, %d bytes) but its time index is empty", s.records, s.bytes)
	}
	return s.emit(oldest)
}

// emit removes the buffered update of time index key tk from the store and
// forwards it.
func (s *suppress[K, V]) emit(tk []byte) error {
	if len(tk) < 9 {
		return errorf(s.env.node, "corrupt time index key (%d bytes)", len(tk))
	}
	kb := tk[9:]
	s.ekey = suppressKeyKey(append(s.ekey[:0], kb...))
	raw, found, err := s.kv.Get(s.ekey)
	if err != nil {
		return errorf(s.env.node, "get buffered update: %w", err)
	}
	if !found {
		return errorf(s.env.node, "time index entry without a buffered update")
	}
	e, err := decodeSuppressEntry(raw)
	if err != nil {
		return errorf(s.env.node, "%w", err)
	}
	if err := s.kv.Delete(tk); err != nil {
		return errorf(s.env.node, "delete time index: %w", err)
	}
	if err := s.kv.Delete(s.ekey); err != nil {
		return errorf(s.env.node, "delete buffered update: %w", err)
	}
	if err := s.unhold(e.ts, kb); err != nil {
		return err
	}
	s.records--
	s.bytes -= e.size(len(kb))
	out := Record[K, change[V]]{Timestamp: e.ts, Headers: e.headers}
	if out.Key, err = s.ks.Decode(kb); err != nil {
		return errorf(s.env.node, "decode buffered key: %w", err)
	}
	if e.hasNew {
		if out.Value.newV, err = s.vs.Decode(e.newValue); err != nil {
			return errorf(s.env.node, "decode buffered value: %w", err)
		}
		out.Value.hasNew = true
	}
	if e.hasPrior {
		if out.Value.oldV, err = s.vs.Decode(e.prior); err != nil {
			return errorf(s.env.node, "decode buffered old value: %w", err)
		}
		out.Value.hasOld = true
	}
	defer setTenant(s.env.TaskEnv, untenanted(s.env.TaskEnv))
	return s.next.forward(out)
}
