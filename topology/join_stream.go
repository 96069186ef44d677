package topology

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

type joinKind int

const (
	innerJoin joinKind = iota
	leftJoin
	outerJoin
)

func (k joinKind) String() string { return [...]string{"JOIN", "LEFTJOIN", "OUTERJOIN"}[k] }

// Join joins s with other on equal keys within w: each pair of records at
// most w apart yields joiner(key, left, right), timestamped with the later
// of the two. Tombstones are skipped (DropSkipped) and records with a null
// key dropped (DropNullKey); both still advance the join's stream time, as
// in Kafka Streams. Inputs whose key may have changed are repartitioned
// first; the two inputs must be co-partitioned (recorded in
// CopartitionGroups). There is no lateness check, as in Kafka Streams: a
// record past its window + grace still joins what the join's stores retain
// (each input's store keeps its records up to before + after + grace behind
// that input's latest timestamp, as each of Kafka Streams' join stores
// expires by its own, not the join's stream time; with a negative
// before or after, up to the other bound + grace, so that every pair within
// the window is found: Kafka Streams' stores lose those pairs).
func (s Stream[K, V]) Join[V2, VR any](other Stream[K, V2], joiner func(key K, left V, right V2) VR, w JoinWindows, opts ...StoreOption) Stream[K, VR] {
	return joinStreams(s, other, innerJoin, func(k K, l V, _ bool, r V2, _ bool) VR { return joiner(k, l, r) }, w, opts)
}

// LeftJoin is Join that also emits each left record no right record joined,
// as joiner(key, left, zero, false), once its window has closed (stream
// time > its timestamp + after + grace), with the left record's timestamp:
// Kafka Streams' behaviour since 3.1, which avoids spurious left-only
// results for records that are joined later. A left record that arrives
// after its window end (stream time > t + after, grace or not) and joins
// nothing is emitted at once, as Kafka Streams does. A left record with a
// null key can join nothing: it is emitted at once, unjoined, keeping its
// null key (KIP-962); a right record with a null key is dropped
// (DropNullKey).
func (s Stream[K, V]) LeftJoin[V2, VR any](other Stream[K, V2], joiner func(key K, left V, right V2, rightFound bool) VR, w JoinWindows, opts ...StoreOption) Stream[K, VR] {
	return joinStreams(s, other, leftJoin, func(k K, l V, _ bool, r V2, rok bool) VR { return joiner(k, l, r, rok) }, w, opts)
}

// OuterJoin is LeftJoin that also emits unjoined right records once their
// window has closed, and right records with a null key at once.
func (s Stream[K, V]) OuterJoin[V2, VR any](other Stream[K, V2], joiner func(key K, left V, leftFound bool, right V2, rightFound bool) VR, w JoinWindows, opts ...StoreOption) Stream[K, VR] {
	return joinStreams(s, other, outerJoin, joiner, w, opts)
}

// sideNames derives the names of a multi-node operator's parts: explicit
// ones from the user's name, generated ones from the usual rule.
func sideCfg(cfg *opConfig, suffix string) *opConfig {
	c := &opConfig{notLogged: cfg.notLogged, changelogConf: cfg.changelogConf}
	if cfg.name != "" {
		c.name = cfg.name + suffix
	}
	return c
}

func joinStreams[K, V, V2, VR any](s Stream[K, V], other Stream[K, V2], kind joinKind, joiner func(K, V, bool, V2, bool) VR, w JoinWindows, opts []StoreOption) Stream[K, VR] {
	b := s.b
	cfg := newOpConfig(opts)
	// A re-keyed input's repartition topic is sized like the other input
	// when that one is not repartitioned, as Kafka Streams sizes it to
	// co-partition them; two repartitioned inputs both get the larger of
	// their writers' counts (Topology.CopartitionedCounts).
	lre, rre := s.rekeyed, other.rekeyed
	if lre {
		s = s.repartition("REPARTITION", sideCfg(cfg, "-left"))
		if !rre {
			b.sizeByReader(s.n.topics0())
		}
	}
	if rre {
		other = other.repartition("REPARTITION", sideCfg(cfg, "-right"))
		if !lre {
			b.sizeByReader(other.n.topics0())
		}
	}
	core := &ssJoinOp[K, V, V2, VR]{kind: kind, w: w, joiner: joiner, ks: s.ks, lvs: s.vs, rvs: other.vs}
	this := b.addNode(KindProcessor, kind.String()+"-THIS", []*node{s.n}, sideCfg(cfg, "-this"), &ssJoinSide[K, V, V2, VR]{op: core, left: true})
	that := b.addNode(KindProcessor, kind.String()+"-OTHER", []*node{other.n}, sideCfg(cfg, "-other"), &ssJoinSide[K, V, V2, VR]{op: core})
	b.checkSame(this, other.b)
	merge := b.addNode(KindProcessor, kind.String(), []*node{this, that}, cfg,
		opFunc[K, VR, K, VR](func(_ *opEnv, next forwarder[K, VR]) (receiver[K, VR], error) {
			return receiverFunc[K, VR](next.forward), nil
		}))
	core.name = merge.name
	// Both inputs' repartitions keep null keys for a left or outer join, as
	// Kafka Streams labels the whole join node (the join side then drops a
	// right record with a null key of a left join).
	merge.nullKeyRelaxed = kind != innerJoin
	if err := w.validate(); err != nil {
		b.fail(errorf(merge.name, "%w", err))
	}
	retention := w.reach() + w.grace
	spec := store.Spec{Kind: store.KindWindow, WindowSize: w.before + w.after + 1, Retention: retention}
	core.thisStore = b.addStore(this, sideCfg(cfg, "-this"), "", spec, false)
	core.otherStore = b.addStore(that, sideCfg(cfg, "-other"), "", spec, false)
	b.connect(this, core.otherStore)
	b.connect(that, core.thisStore)
	if kind != innerJoin {
		core.outerStore = b.addStore(this, sideCfg(cfg, "-outer"), "-OUTER", kvSpec(), false)
		b.connect(that, core.outerStore)
	}
	if s.ks == nil {
		b.fail(errorf(merge.name, "%w: key serde for the join stores", ErrMissingSerde))
	}
	if s.vs == nil || other.vs == nil {
		b.fail(errorf(merge.name, "%w: value serdes of both join inputs are needed for the join stores", ErrMissingSerde))
	}
	b.requireCopartition(merge.name, s.n, other.n)
	return Stream[K, VR]{b: b, n: merge, ks: s.ks, vs: serdeAs[VR](s.vs)}
}

// ssJoinOp holds what both sides of a stream-stream join share.
type ssJoinOp[K, V, V2, VR any] struct {
	name                              string
	kind                              joinKind
	w                                 JoinWindows
	joiner                            func(K, V, bool, V2, bool) VR
	ks                                serde.Serde[K]
	lvs                               serde.Serde[V]
	rvs                               serde.Serde[V2]
	thisStore, otherStore, outerStore string
}

// ssJoinSide is the node for one input; both sides of a task share one
// ssJoin instance, and so one stream time, as Kafka Streams' joins do.
type ssJoinSide[K, V, V2, VR any] struct {
	op   *ssJoinOp[K, V, V2, VR]
	left bool
}

func (j *ssJoinSide[K, V, V2, VR]) instantiate(env *opEnv, children []any) (any, error) {
	next, err := forwarderOf[K, VR](env, children)
	if err != nil {
		return nil, err
	}
	var mkErr error
	inst := env.sharedValue("ssjoin/"+j.op.name, func() any {
		c := &ssJoin[K, V, V2, VR]{op: j.op, next: next, outerFloor: math.MinInt64}
		c.observed = operatorClock(env, j.op.name, func() int64 { return c.observed })
		// Each store's own clock, kept under the store's name. A task
		// resumed from a commit without them (an older version) takes the
		// shared clock: no store keeps more than it did then.
		c.seenThis = operatorClock(env, j.op.thisStore, func() int64 { return c.seenThis })
		c.seenOther = operatorClock(env, j.op.otherStore, func() int64 { return c.seenOther })
		if c.seenThis < 0 {
			c.seenThis = c.observed
		}
		if c.seenOther < 0 {
			c.seenOther = c.observed
		}
		if c.this, mkErr = env.window(j.op.thisStore); mkErr != nil {
			return c
		}
		if c.other, mkErr = env.window(j.op.otherStore); mkErr != nil {
			return c
		}
		if j.op.outerStore != "" {
			c.outer, mkErr = env.keyValue(j.op.outerStore)
		}
		w, joiner := j.op.w, j.op.joiner
		c.left = ssJoinInput[K, V, V2, VR]{mine: c.this, seen: &c.seenThis, theirs: c.other, vs: j.op.lvs, theirVS: j.op.rvs,
			back: w.before, ahead: w.after, tag: sideLeft, theirTag: sideRight,
			join:     func(k K, l V, r V2) VR { return joiner(k, l, true, r, true) },
			unjoined: func(k K, l V) VR { var r V2; return joiner(k, l, true, r, false) },
			outer:    j.op.kind != innerJoin}
		c.right = ssJoinInput[K, V2, V, VR]{mine: c.other, seen: &c.seenOther, theirs: c.this, vs: j.op.rvs, theirVS: j.op.lvs,
			back: w.after, ahead: w.before, tag: sideRight, theirTag: sideLeft,
			join:     func(k K, r V2, l V) VR { return joiner(k, l, true, r, true) },
			unjoined: func(k K, r V2) VR { var l V; return joiner(k, l, false, r, true) },
			outer:    j.op.kind == outerJoin}
		return c
	}).(*ssJoin[K, V, V2, VR])
	if mkErr != nil {
		return nil, mkErr
	}
	if j.left {
		return receiverFunc[K, V](func(r Record[K, V]) error { return inst.process(env, &inst.left, r) }), nil
	}
	return receiverFunc[K, V2](func(r Record[K, V2]) error { return inst.process(env, &inst.right, r) }), nil
}

type ssJoin[K, V, V2, VR any] struct {
	op          *ssJoinOp[K, V, V2, VR]
	this, other store.Window
	outer       store.KeyValue
	// outerFloor is at most the smallest timestamp in outer (math.MinInt64:
	// unknown, as after a restart): emitDue scans from it, not over the
	// tombstones of the records emitted before it, which Badger keeps until
	// compaction.
	outerFloor int64
	next       forwarder[K, VR]
	observed   int64
	// seenThis and seenOther are the stores' own clocks: the largest
	// timestamp each input has stored (-1: none yet). Each store keeps the
	// records down to its own clock − reach − grace, as each of Kafka
	// Streams' join window stores expires by the timestamps put into it,
	// not by the join's shared stream time (observed): input that runs
	// ahead on one side does not expire the other side's records.
	seenThis, seenOther int64
	kbuf, vbuf, obuf    []byte
	matched             []int64
	left                ssJoinInput[K, V, V2, VR]
	right               ssJoinInput[K, V2, V, VR]
}

const (
	sideLeft  = 'L'
	sideRight = 'R'
)

func outerKey(dst []byte, ts int64, side byte, kb []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(ts))
	dst = append(dst, side)
	return append(dst, kb...)
}

// appendTo adds an encoded value to the list at (kb, ts) of a window store.
func appendTo(st store.Window, kb []byte, ts int64, item []byte) error {
	old, _, err := st.Fetch(kb, ts)
	if err != nil {
		return err
	}
	return st.Put(kb, ts, appendListItem(bytes.Clone(old), item))
}

// ssJoinInput is one input of a stream-stream join seen from that input:
// the store it adds its records to, the store it probes, and how far the
// window reaches from one of its records into the other input's (before
// and after are swapped for the right input). The two inputs run the same
// steps; only these, and the argument order of the joiner, differ.
type ssJoinInput[K, VM, VO, VR any] struct {
	mine, theirs  store.Window
	seen          *int64 // mine's clock (ssJoin.seenThis or seenOther)
	vs            serde.Serde[VM]
	theirVS       serde.Serde[VO]
	back, ahead   int64 // a record at t joins their records in [t-back, t+ahead]
	tag, theirTag byte  // sideLeft or sideRight, in the outer store
	join          func(k K, mine VM, theirs VO) VR
	unjoined      func(k K, mine VM) VR
	// outer: this input's unjoined records are emitted (the left input of
	// left and outer joins, the right input of outer joins).
	outer bool
}

// process stores r, joins it with the other input's records in its
// window and updates the outer-join store. Every record advances stream
// time, as in Kafka Streams' KStreamKStreamJoin, even one it then skips (a
// tombstone) or cannot join (a null key: emitted at once, unjoined, on an
// outer input, dropped on the others).
//
// There is no lateness check, as in Kafka Streams: a record whose window
// (t+ahead) plus grace is already behind stream time still joins whatever
// the other input's store retains (JoinWindows.reach + grace behind that
// store's own clock, the largest timestamp stored into it), and on an
// outer input, unmatched, it is emitted unjoined at once (settle). Grace
// bounds how long records are kept and when unjoined ones are emitted, not
// which records may join. A record older than what its own store retains
// is not stored (expire would never reach it again: its cut only rises),
// and can only be emitted unjoined.
func (j *ssJoin[K, V, V2, VR]) process[VM, VO any](env *opEnv, in *ssJoinInput[K, VM, VO, VR], r Record[K, VM]) error {
	j.observed = max(j.observed, r.Timestamp)
	// Every advance of the clock emits what it made due and expires what
	// the stores no longer retain, even when the record that moved it is
	// skipped: the output frontier's bound (topology/watermark.go) rests
	// on both. (A tombstone that moved the clock left records below the
	// cut in the stores, and a later record joined one of them below the
	// watermark already published; found by TestOutputWatermarkIsSound.)
	if err := j.emitDue(env, r.Timestamp, r.Headers); err != nil {
		return err
	}
	if err := j.join(env, in, r); err != nil {
		return err
	}
	return j.expire(env)
}

// join joins r with the other input's records in its window, stores it and
// updates the outer-join store; process expires after it.
func (j *ssJoin[K, V, V2, VR]) join[VM, VO any](env *opEnv, in *ssJoinInput[K, VM, VO, VR], r Record[K, VM]) error {
	if r.Tombstone {
		env.Dropped(env.node, DropSkipped)
		return nil
	}
	if r.NullKey {
		if !in.outer {
			env.Dropped(env.node, DropNullKey)
			return nil
		}
		return j.next.forward(Record[K, VR]{Key: r.Key, Value: in.unjoined(r.Key, r.Value), Timestamp: r.Timestamp, Headers: r.Headers, NullKey: true})
	}
	var err error
	if j.kbuf, err = j.op.ks.Encode(j.kbuf[:0], r.Key); err != nil {
		return errorf(env.node, "encode key: %w", err)
	}
	kb := storeKey(j.kbuf)
	if j.vbuf, err = in.vs.Encode(j.vbuf[:0], r.Value); err != nil {
		return errorf(env.node, "encode value: %w", err)
	}
	*in.seen = max(*in.seen, r.Timestamp)
	if r.Timestamp >= j.cut(*in.seen) {
		if err := appendTo(in.mine, kb, r.Timestamp, j.vbuf); err != nil {
			return errorf(env.node, "store record: %w", err)
		}
	}
	found := false
	j.matched = j.matched[:0]
	var ferr error
	err = in.theirs.FetchRange(kb, r.Timestamp-in.back, r.Timestamp+in.ahead, func(ots int64, list []byte) bool {
		j.matched = append(j.matched, ots)
		ferr = eachListItem(list, func(item []byte) error {
			ov, err := in.theirVS.Decode(item)
			if err != nil {
				return err
			}
			found = true
			return j.next.forward(Record[K, VR]{Key: r.Key, Value: in.join(r.Key, r.Value, ov), Timestamp: max(r.Timestamp, ots), Headers: r.Headers})
		})
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return errorf(env.node, "join: %w", err)
	}
	if j.outer != nil {
		if err := j.settle(env, kb, in.theirTag, found, in.tag, r.Timestamp, r.Timestamp+in.ahead, j.vbuf, r.Headers); err != nil {
			return err
		}
	}
	return nil
}

// settle updates the outer-join store after a record of side mine at ts:
// the other side's records it matched are no longer unjoined. An unmatched
// record whose window end (windowEnd) stream time has already passed is
// emitted at once, as Kafka Streams does for such out-of-order records;
// otherwise it waits in the store for its window to close. Right records
// only wait in outer joins: left joins never emit lone right records.
// Emitted at once, it keeps its headers (hdrs).
func (j *ssJoin[K, V, V2, VR]) settle(env *opEnv, kb []byte, otherSide byte, found bool, mine byte, ts, windowEnd int64, enc []byte, hdrs []Header) error {
	for _, mts := range j.matched {
		j.obuf = outerKey(j.obuf, mts, otherSide, kb)
		if err := j.outer.Delete(j.obuf); err != nil {
			return errorf(env.node, "outer store: %w", err)
		}
	}
	if found || (mine == sideRight && j.op.kind != outerJoin) {
		return nil
	}
	if windowEnd < j.observed {
		return j.emitUnjoined(env, pendingOuter{key: outerKey(nil, ts, mine, kb), list: appendListItem(nil, enc)}, hdrs)
	}
	j.obuf = outerKey(j.obuf, ts, mine, kb)
	old, _, err := j.outer.Get(j.obuf)
	if err == nil {
		err = j.outer.Put(j.obuf, appendListItem(bytes.Clone(old), enc))
		j.outerFloor = min(j.outerFloor, ts)
	}
	if err != nil {
		return errorf(env.node, "outer store: %w", err)
	}
	return nil
}

type pendingOuter struct {
	key  []byte
	list []byte
}

// emitDue emits, oldest first, the unjoined records whose window plus grace
// stream time has passed (ts + after + grace < stream time for left
// records, ts + before + grace for right ones). Like Kafka Streams it runs
// before an in-order record (one at stream time) is joined; Kafka Streams
// also throttles it by wall-clock time, which a deterministic task does not.
// The records carry the headers of the record whose arrival emits them
// (hdrs), as in Kafka Streams, which forwards the triggering record with
// the unjoined key, value and timestamp: the store keeps no headers.
func (j *ssJoin[K, V, V2, VR]) emitDue(env *opEnv, ts int64, hdrs []Header) error {
	if j.outer == nil || ts != j.observed {
		return nil
	}
	w := j.op.w
	// soonest is the least a record in the store waits past its timestamp:
	// left records wait after, right ones (outer joins only) before. Only
	// records below observed − soonest are scanned; in a left join with an
	// asymmetric window (JoinWindowsOf(d, g).Before(0)) every left record
	// waits a whole after, and taking before for it rescanned all pending
	// records at every record.
	soonest := w.after + w.grace
	if j.op.kind == outerJoin {
		soonest = min(w.before, w.after) + w.grace
	}
	if j.outerFloor != math.MinInt64 && (j.outerFloor == math.MaxInt64 || j.outerFloor+soonest >= j.observed) {
		return nil // no record in the store can be due yet
	}
	var due []pendingOuter
	upper := binary.BigEndian.AppendUint64(nil, uint64(max(0, j.observed-soonest)))
	var from []byte
	if j.outerFloor != math.MinInt64 {
		from = binary.BigEndian.AppendUint64(nil, uint64(max(0, j.outerFloor)))
	}
	// One scan takes the due records, the ones below upper that are not
	// due yet and the first one past it: floor becomes the smallest
	// timestamp left once the due are emitted.
	floor := int64(math.MaxInt64)
	err := j.outer.Range(from, nil, func(k, v []byte) bool {
		ts := int64(binary.BigEndian.Uint64(k))
		if bytes.Compare(k, upper) >= 0 {
			floor = min(floor, ts)
			return false
		}
		look := w.after
		if k[8] == sideRight {
			look = w.before
		}
		if ts+look+w.grace < j.observed {
			due = append(due, pendingOuter{key: bytes.Clone(k), list: bytes.Clone(v)})
		} else {
			floor = min(floor, ts)
		}
		return true
	})
	if err != nil {
		return errorf(env.node, "scan outer store: %w", err)
	}
	for _, p := range due {
		if err := j.emitUnjoined(env, p, hdrs); err != nil {
			return err
		}
		if err := j.outer.Delete(p.key); err != nil {
			return errorf(env.node, "outer store: %w", err)
		}
	}
	j.outerFloor = floor
	return nil
}

// cut is the oldest timestamp a join store whose clock is seen retains:
// records before it are expired.
func (j *ssJoin[K, V, V2, VR]) cut(seen int64) int64 {
	w := j.op.w
	return seen - w.reach() - w.grace
}

// expire drops the records the stores no longer retain, each by its own
// clock.
func (j *ssJoin[K, V, V2, VR]) expire(env *opEnv) error {
	if err := j.this.ExpireBefore(j.cut(j.seenThis)); err != nil {
		return errorf(env.node, "expire: %w", err)
	}
	if err := j.other.ExpireBefore(j.cut(j.seenOther)); err != nil {
		return errorf(env.node, "expire: %w", err)
	}
	return nil
}

func (j *ssJoin[K, V, V2, VR]) emitUnjoined(env *opEnv, p pendingOuter, hdrs []Header) error {
	ts := int64(binary.BigEndian.Uint64(p.key))
	k, err := j.op.ks.Decode(p.key[9:])
	if err != nil {
		return errorf(env.node, "decode key: %w", err)
	}
	err = eachListItem(p.list, func(item []byte) error {
		var out VR
		if p.key[8] == sideLeft {
			lv, err := j.op.lvs.Decode(item)
			if err != nil {
				return err
			}
			var zero V2
			out = j.op.joiner(k, lv, true, zero, false)
		} else {
			rv, err := j.op.rvs.Decode(item)
			if err != nil {
				return err
			}
			var zero V
			out = j.op.joiner(k, zero, false, rv, true)
		}
		return j.next.forward(Record[K, VR]{Key: k, Value: out, Timestamp: ts, Headers: hdrs})
	})
	if err != nil {
		return errorf(env.node, "emit unjoined: %w", err)
	}
	return nil
}
