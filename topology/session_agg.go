package topology

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// SessionWindowedStream is a grouped stream cut into sessions.
type SessionWindowedStream[K, V any] struct {
	g GroupedStream[K, V]
	w SessionWindows
}

// SessionWindowedBy cuts a grouped stream into sessions (a function for the
// reason given at WindowedBy).
func SessionWindowedBy[K, V any](g GroupedStream[K, V], w SessionWindows) SessionWindowedStream[K, V] {
	return SessionWindowedStream[K, V]{g: g, w: w}
}

// Count counts records per session.
func (ss SessionWindowedStream[K, V]) Count(opts ...WindowOption) Table[Windowed[K], int64] {
	return aggregateSession(ss, "SESSION-COUNT", func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 }, func(_ K, a, b int64) int64 { return a + b }, serde.Int64(), opts)
}

// Reduce combines the values of each session; merging sessions combines
// their aggregates with f too.
func (ss SessionWindowedStream[K, V]) Reduce(f func(agg, v V) V, opts ...WindowOption) Table[Windowed[K], V] {
	return aggregateSession(ss, "SESSION-REDUCE", nil,
		func(_ K, v V, agg V) V { return f(agg, v) }, func(_ K, a, b V) V { return f(a, b) }, ss.g.s.vs, opts)
}

// Aggregate folds each session's records starting from init(); when a
// record bridges sessions, merge combines their aggregates (in session
// order) before the record is added. Every change is emitted: the sessions
// a merge replaced are emitted as tombstones, then the merged session. A
// session's output timestamp is its end, the largest timestamp in it.
func (ss SessionWindowedStream[K, V]) Aggregate[VA any](init func() VA, add func(K, V, VA) VA, merge func(k K, a, b VA) VA, aggSerde serde.Serde[VA], opts ...WindowOption) Table[Windowed[K], VA] {
	return aggregateSession(ss, "SESSION-AGGREGATE", zeroInit(init), add, merge, aggSerde, opts)
}

func aggregateSession[K, V, VA any](ss SessionWindowedStream[K, V], op string, init func() VA, add func(K, V, VA) VA, merge func(K, VA, VA) VA, aggSerde serde.Serde[VA], opts []WindowOption) Table[Windowed[K], VA] {
	s, w := ss.g.s, ss.w
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	if err := w.validate(); err != nil {
		s.b.fail(errorf(n.name, "%w", err))
	}
	retention := windowRetention(s.b, n.name, cfg, w.grace)
	name := s.b.addStore(n, cfg, "", store.Spec{Kind: store.KindSession, Retention: retention + w.gap}, true)
	var indexStore string
	if cfg.emitFinal {
		indexStore = s.b.addStore(n, cfg, "-EMIT-INDEX", kvSpec(), false)
	}
	requireAggSerdes(s.b, n.name, name, s.ks, aggSerde)
	n.impl = opFunc[K, V, Windowed[K], change[VA]](func(env *opEnv, next forwarder[Windowed[K], change[VA]]) (receiver[K, V], error) {
		st, err := env.session(name)
		if err != nil {
			return nil, err
		}
		a := &sessionAgg[K, V, VA]{env: env, next: next, st: st, w: w, retention: retention,
			ks: s.ks, vs: aggSerde, init: init, add: add, merge: merge, null: keyNull[VA](), indexFloor: math.MinInt64}
		a.observed = operatorClock(env, name, func() int64 { return a.observed })
		if indexStore != "" {
			if a.index, err = env.keyValue(indexStore); err != nil {
				return nil, err
			}
		}
		return a, nil
	})
	return Table[Windowed[K], VA]{b: s.b, n: n, ks: sessionWindowedKeys(s.ks), vs: aggSerde, store: name,
		src: &funcGetters[Windowed[K], VA]{stores: []string{name}, mk: func(env *opEnv) (getter[Windowed[K], VA], error) {
			st, err := env.session(name)
			if err != nil {
				return nil, err
			}
			return getterFunc[Windowed[K], VA](func(k Windowed[K]) (v VA, ts int64, found bool, err error) {
				kb, err := s.ks.Encode(nil, k.Key)
				if err != nil {
					return v, 0, false, err
				}
				err = st.FindSessions(kb, k.End, k.Start, func(start, end int64, raw []byte) bool {
					if start != k.Start || end != k.End {
						return true
					}
					var vb []byte
					if ts, vb, err = DecodeTimestamped(raw); err == nil {
						v, err = aggSerde.Decode(vb)
					}
					found = err == nil
					return false
				})
				return v, ts, found, err
			}), nil
		}}}
}

type sessionAgg[K, V, VA any] struct {
	env       *opEnv
	next      forwarder[Windowed[K], change[VA]]
	st        store.Session
	w         SessionWindows
	retention int64
	ks        serde.Serde[K]
	vs        serde.Serde[VA]
	init      func() VA
	add       func(K, V, VA) VA
	merge     func(K, VA, VA) VA
	// null tests for a null aggregate (nil: VA is never null), which
	// deletes its session as Kafka Streams' put of a null does.
	null func(VA) bool
	// index, for emit final, lists open sessions by end: sessions have no
	// cross-key scan by end in store.Session.
	index store.KeyValue
	// indexFloor is at most the smallest end in index (math.MinInt64:
	// unknown, as after a restart): emitClosed scans from it, not over the
	// tombstones of the sessions emitted before it, which Badger keeps until
	// compaction.
	indexFloor int64
	observed   int64
	kbuf       []byte
	vbuf       []byte
	ibuf       []byte
	found      []foundSession
}

func sessionIndexKey(dst []byte, end, start int64, kb []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(end))
	dst = binary.BigEndian.AppendUint64(dst, uint64(start))
	return append(dst, kb...)
}

type foundSession struct {
	start, end int64
	value      []byte
}

func (a *sessionAgg[K, V, VA]) process(r Record[K, V]) error {
	if dropNullKey(a.env, &r) { // before the clock: Kafka Streams checks the key first
		return nil
	}
	if r.Tombstone {
		a.env.Dropped(a.env.node, DropSkipped)
		return nil
	}
	a.observed = max(a.observed, r.Timestamp)
	// A session accepts records until no in-grace record could extend it:
	// its end + gap reaches stream time − grace (closeTime), the rule
	// emitClosed finalises it by. Kafka Streams closes it then too: its
	// suppression emits a session with end ≤ closeTime, and its store,
	// which keeps gap + grace, no longer returns it to a record within
	// gap. A record is late if the session it would form is closed by
	// that rule. (Kafka Streams' KStreamSessionWindowAggregate drops only
	// sessions ending before closeTime: one ending exactly at it is
	// accepted and at once final, and a second record there emits it
	// again, its count restarted; here such a record is late.) Without
	// the gap a record that merges into a session still open would be
	// dropped as late.
	closeTime := a.observed - a.w.grace - a.w.gap
	var err error
	if a.kbuf, err = a.ks.Encode(a.kbuf[:0], r.Key); err != nil {
		return errorf(a.env.node, "encode key: %w", err)
	}
	kb := storeKey(a.kbuf)
	t := r.Timestamp
	a.found = a.found[:0]
	err = a.st.FindSessions(kb, t-a.w.gap, t+a.w.gap, func(start, end int64, v []byte) bool {
		// A closed session is never reopened, even while the store
		// still holds it (WithRetention beyond grace): its final result
		// may have been emitted. The record forms a session without it.
		if end > closeTime {
			a.found = append(a.found, foundSession{start: start, end: end, value: bytes.Clone(v)})
		}
		return true
	})
	if err != nil {
		return errorf(a.env.node, "find sessions: %w", err)
	}
	olds, err := a.decodeFound()
	if err != nil {
		return err
	}
	start, end := t, t
	var agg VA
	have := false
	for i, f := range a.found {
		start, end = min(start, f.start), max(end, f.end)
		if !have {
			agg, have = olds[i], true
			if a.init != nil {
				agg = a.merge(r.Key, a.init(), olds[i])
			}
		} else {
			agg = a.merge(r.Key, agg, olds[i])
		}
	}
	if end <= closeTime {
		a.env.Dropped(a.env.node, DropLate)
		return nil
	}
	agg = fold(a.init, a.add, r.Key, r.Value, agg, have)
	// A session the record lands inside keeps its bounds and is updated
	// in place: its update carries the aggregate it replaces, so that
	// table aggregations downstream subtract it (Kafka Streams retracts
	// it with a tombstone first).
	var prev VA
	hasPrev := false
	for i, f := range a.found {
		if f.start == start && f.end == end {
			prev, hasPrev = olds[i], true
			continue
		}
		if err := a.st.Remove(kb, f.start, f.end); err != nil {
			return errorf(a.env.node, "remove session [%d,%d]: %w", f.start, f.end, err)
		}
		if a.index != nil {
			a.ibuf = sessionIndexKey(a.ibuf, f.end, f.start, kb)
			if err := a.index.Delete(a.ibuf); err != nil {
				return errorf(a.env.node, "session index: %w", err)
			}
			continue
		}
		out := Record[Windowed[K], change[VA]]{Key: Windowed[K]{Key: r.Key, Start: f.start, End: f.end}, Timestamp: f.end,
			Value: change[VA]{oldV: olds[i], hasOld: true}}
		if err := a.next.forward(out); err != nil {
			return err
		}
	}
	// A null aggregate deletes the session, as Kafka Streams' put of a
	// null does; the key's next record starts a session from init().
	kept := !isNull(a.null, agg)
	if !kept {
		if hasPrev {
			if err := a.st.Remove(kb, start, end); err != nil {
				return errorf(a.env.node, "remove session [%d,%d]: %w", start, end, err)
			}
		}
	} else {
		if a.vbuf, err = appendValueTS(a.vbuf, a.vs, end, agg); err != nil {
			return errorf(a.env.node, "encode aggregate: %w", err)
		}
		if err := a.st.Put(kb, start, end, a.vbuf); err != nil {
			return errorf(a.env.node, "put session [%d,%d]: %w", start, end, err)
		}
	}
	if a.index != nil {
		a.ibuf = sessionIndexKey(a.ibuf, end, start, kb)
		if kept {
			err = a.index.Put(a.ibuf, []byte{})
			a.indexFloor = min(a.indexFloor, end)
		} else {
			err = a.index.Delete(a.ibuf) // a deleted session has no final result
		}
		if err != nil {
			return errorf(a.env.node, "session index: %w", err)
		}
		if err := a.emitClosed(); err != nil {
			return err
		}
	} else {
		out := Record[Windowed[K], change[VA]]{Key: Windowed[K]{Key: r.Key, Start: start, End: end}, Timestamp: end, Headers: r.Headers,
			Value: change[VA]{newV: agg, hasNew: kept, oldV: prev, hasOld: hasPrev}}
		if err := a.next.forward(out); err != nil {
			return err
		}
	}
	if err := a.st.ExpireBefore(a.observed - a.retention - a.w.gap); err != nil {
		return errorf(a.env.node, "expire sessions: %w", err)
	}
	return nil
}

// decodeFound decodes the aggregates of a.found. A null one (stored before
// null aggregates were deleted) is no session: it is left out of a.found.
func (a *sessionAgg[K, V, VA]) decodeFound() ([]VA, error) {
	olds := make([]VA, 0, len(a.found))
	kept := a.found[:0]
	for _, f := range a.found {
		_, vb, err := DecodeTimestamped(f.value)
		var v VA
		if err == nil {
			v, err = a.vs.Decode(vb)
		}
		if err != nil {
			return nil, errorf(a.env.node, "decode session [%d,%d]: %w", f.start, f.end, err)
		}
		if isNull(a.null, v) {
			continue
		}
		olds, kept = append(olds, v), append(kept, f)
	}
	a.found = kept
	return olds, nil
}

// emitClosed emits the final result of each session no record can extend
// any more, ordered by end: end + gap ≤ stream time − grace, as Kafka
// Streams' suppress(untilWindowCloses) does (end ≤ stream time − grace −
// gap; KAFKA-12718).
func (a *sessionAgg[K, V, VA]) emitClosed() error {
	bound := a.observed - a.w.grace - a.w.gap // sessions with end ≤ bound are final
	if bound < 0 || (a.indexFloor != math.MinInt64 && a.indexFloor > bound) {
		return nil // no session in the index is final yet
	}
	var due [][]byte
	var from []byte
	if a.indexFloor != math.MinInt64 {
		from = binary.BigEndian.AppendUint64(nil, uint64(max(0, a.indexFloor)))
	}
	// One scan takes the final sessions and the first one left, whose end
	// is the new floor.
	upper := binary.BigEndian.AppendUint64(nil, uint64(bound+1))
	floor := int64(math.MaxInt64)
	err := a.index.Range(from, nil, func(k, _ []byte) bool {
		if bytes.Compare(k, upper) >= 0 {
			floor = int64(binary.BigEndian.Uint64(k))
			return false
		}
		due = append(due, bytes.Clone(k))
		return true
	})
	if err != nil {
		return errorf(a.env.node, "scan session index: %w", err)
	}
	for _, ik := range due {
		end := int64(binary.BigEndian.Uint64(ik))
		start := int64(binary.BigEndian.Uint64(ik[8:]))
		kb := ik[16:]
		var raw []byte
		err := a.st.FindSessions(kb, end, start, func(s, e int64, v []byte) bool {
			if s == start && e == end {
				raw = bytes.Clone(v)
				return false
			}
			return true
		})
		if err != nil {
			return errorf(a.env.node, "fetch session [%d,%d]: %w", start, end, err)
		}
		if raw != nil {
			out, err := decodeWindowed(a.ks, a.vs, kb, start, end, raw)
			if err != nil {
				return errorf(a.env.node, "%w", err)
			}
			tenant := untenanted(a.env.TaskEnv)
			err = a.next.forward(out)
			setTenant(a.env.TaskEnv, tenant)
			if err != nil {
				return err
			}
			windowsClosed(a.env.TaskEnv, 1)
		}
		if err := a.index.Delete(ik); err != nil {
			return errorf(a.env.node, "session index: %w", err)
		}
	}
	a.indexFloor = floor
	return nil
}
