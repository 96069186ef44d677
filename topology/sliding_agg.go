package topology

import (
	"bytes"
	"sort"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// SlidingWindowedStream is a grouped stream cut into sliding windows.
type SlidingWindowedStream[K, V any] struct {
	g GroupedStream[K, V]
	w SlidingWindows
}

// SlidingWindowedBy cuts a grouped stream into sliding windows (a function
// for the reason given at WindowedBy).
//
// The windows are those of Kafka Streams' SlidingWindows: each record at t
// has a left window [t−d, t] and, once a later record falls within d+1 of it,
// a right window [t+1, t+1+d]; both bounds inclusive. Every window a record
// enters is emitted with its new aggregate. As in Kafka Streams
// (processEarly), a record earlier than d has the left window [0, d], which
// holds every record in [0, d], rather than one with a negative start.
func SlidingWindowedBy[K, V any](g GroupedStream[K, V], w SlidingWindows) SlidingWindowedStream[K, V] {
	return SlidingWindowedStream[K, V]{g: g, w: w}
}

// Count counts records per key and sliding window.
func (ss SlidingWindowedStream[K, V]) Count(opts ...SlidingWindowOption) Table[Windowed[K], int64] {
	return aggregateSliding(ss, "SLIDING-COUNT", func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64(), opts)
}

// Aggregate folds the records of each sliding window, in timestamp order,
// starting from init().
func (ss SlidingWindowedStream[K, V]) Aggregate[VA any](init func() VA, add func(K, V, VA) VA, aggSerde serde.Serde[VA], opts ...SlidingWindowOption) Table[Windowed[K], VA] {
	return aggregateSliding(ss, "SLIDING-AGGREGATE", zeroInit(init), add, aggSerde, opts)
}

// aggregateSliding keeps the raw records of the last d+grace in a window
// store (one list of values per key and timestamp) and recomputes each
// window a record touches from them, so aggregations need no subtractor.
func aggregateSliding[K, V, VA any](ss SlidingWindowedStream[K, V], op string, init func() VA, add func(K, V, VA) VA, aggSerde serde.Serde[VA], opts []SlidingWindowOption) Table[Windowed[K], VA] {
	s, w := ss.g.s, ss.w
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	if err := w.validate(); err != nil {
		s.b.fail(errorf(n.name, "%w", err))
	}
	name := s.b.addStore(n, cfg, "", store.Spec{Kind: store.KindWindow, WindowSize: w.diff, Retention: w.grace}, true)
	raw := s.b.addStore(n, cfg, "-RECORDS", store.Spec{Kind: store.KindWindow, WindowSize: 1, Retention: w.diff + w.grace + 1}, false)
	var cursorStore string
	if cfg.emitFinal {
		cursorStore = s.b.addStore(n, cfg, "-EMIT-CURSOR", kvSpec(), false)
	}
	requireAggSerdes(s.b, n.name, name, s.ks, aggSerde)
	if s.vs == nil {
		s.b.fail(errorf(n.name, "%w: value serde for store %q", ErrMissingSerde, raw))
	}
	n.impl = opFunc[K, V, Windowed[K], change[VA]](func(env *opEnv, next forwarder[Windowed[K], change[VA]]) (receiver[K, V], error) {
		res, err := env.window(name)
		if err != nil {
			return nil, err
		}
		recs, err := env.window(raw)
		if err != nil {
			return nil, err
		}
		// [s, s+d] is inclusive: it spans d+1 ms.
		final, err := openFinalEmitter(env, cursorStore, w.diff+1, 0)
		if err != nil {
			return nil, err
		}
		a := &slidingAgg[K, V, VA]{env: env, next: next, res: res, recs: recs, w: w, ks: s.ks, vs: s.vs, as: aggSerde,
			init: init, add: add, final: final, null: keyNull[VA]()}
		a.observed = operatorClock(env, name, func() int64 { return a.observed })
		return a, nil
	})
	return Table[Windowed[K], VA]{b: s.b, n: n, ks: timeWindowedKeys(s.ks, w.diff), vs: aggSerde, store: name,
		src: &windowGetters[K, VA]{name: name, ks: s.ks, vs: aggSerde}}
}

type slidingAgg[K, V, VA any] struct {
	env       *opEnv
	next      forwarder[Windowed[K], change[VA]]
	res, recs store.Window
	w         SlidingWindows
	ks        serde.Serde[K]
	vs        serde.Serde[V]
	as        serde.Serde[VA]
	init      func() VA
	add       func(K, V, VA) VA
	final     *finalEmitter
	// null tests for a null aggregate (nil: VA is never null), which
	// deletes its window as Kafka Streams' put of a null does.
	null     func(VA) bool
	observed int64
	kbuf     []byte
}

type tsList struct {
	ts   int64
	list []byte
}

func (a *slidingAgg[K, V, VA]) process(r Record[K, V]) error {
	if dropNullKey(a.env, &r) { // before the clock: Kafka Streams checks the key first
		return nil
	}
	if r.Tombstone {
		a.env.Dropped(a.env.node, DropSkipped)
		return nil
	}
	d, g, t := a.w.diff, a.w.grace, r.Timestamp
	a.observed = max(a.observed, t)
	closed := func(end int64) bool { return end+g < a.observed }
	if closed(t + d) {
		a.env.Dropped(a.env.node, DropLate)
		return nil
	}
	var err error
	if a.kbuf, err = a.ks.Encode(a.kbuf[:0], r.Key); err != nil {
		return errorf(a.env.node, "encode key: %w", err)
	}
	kb := bytes.Clone(a.kbuf)
	vb, err := a.vs.Encode(nil, r.Value)
	if err != nil {
		return errorf(a.env.node, "encode value: %w", err)
	}
	if err := appendTo(a.recs, kb, t, vb); err != nil {
		return errorf(a.env.node, "store record: %w", err)
	}
	// Every record that can share a window with t, in timestamp order.
	var near []tsList
	err = a.recs.FetchRange(kb, t-2*d-1, t+2*d+1, func(ts int64, list []byte) bool {
		near = append(near, tsList{ts: ts, list: bytes.Clone(list)})
		return true
	})
	if err != nil {
		return errorf(a.env.node, "fetch records: %w", err)
	}
	type win struct{ start, end int64 }
	var wins []win
	addWin := func(s, e int64) {
		for _, w := range wins {
			if w.start == s {
				return
			}
		}
		wins = append(wins, win{s, e})
	}
	addWin(a.leftStart(t), a.leftStart(t)+d)
	for _, o := range near {
		if o.ts > t && a.leftStart(o.ts) <= t {
			// a later record's left window now holds t
			addWin(a.leftStart(o.ts), a.leftStart(o.ts)+d)
		}
		if o.ts < t && o.ts+1+d >= t {
			addWin(o.ts+1, o.ts+1+d) // an earlier record's right window now holds t
		}
		if o.ts > t && o.ts <= t+1+d {
			addWin(t+1, t+1+d) // t's own right window, for out-of-order t
		}
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i].start < wins[j].start })
	for _, w := range wins {
		if closed(w.end) {
			continue
		}
		old, found, err := a.previous(kb, w.start)
		if err != nil {
			return err
		}
		if found && w.start > t {
			// t's own right window, which does not hold t, exists
			// already: it is unchanged, and Kafka Streams forwards
			// nothing for it (rightWinAlreadyCreated).
			continue
		}
		agg, maxTS, any := a.init(), int64(-1), false
		for _, o := range near {
			if o.ts < w.start || o.ts > w.end {
				continue
			}
			err := eachListItem(o.list, func(item []byte) error {
				v, err := a.vs.Decode(item)
				if err != nil {
					return err
				}
				agg, maxTS, any = a.add(r.Key, v, agg), max(maxTS, o.ts), true
				return nil
			})
			if err != nil {
				return errorf(a.env.node, "decode record: %w", err)
			}
		}
		if !any {
			continue
		}
		kept := !isNull(a.null, agg)
		var enc []byte // nil deletes the window
		if kept {
			if enc, err = appendValueTS(nil, a.as, maxTS, agg); err != nil {
				return errorf(a.env.node, "encode aggregate: %w", err)
			}
		}
		if err := a.res.Put(kb, w.start, enc); err != nil {
			return errorf(a.env.node, "put window: %w", err)
		}
		if a.final != nil {
			continue
		}
		// The update carries the window's previous aggregate, so that
		// table aggregations downstream subtract it.
		out := Record[Windowed[K], change[VA]]{Key: Windowed[K]{Key: r.Key, Start: w.start, End: w.end}, Timestamp: maxTS, Headers: r.Headers,
			Value: change[VA]{newV: agg, hasNew: kept, oldV: old, hasOld: found}}
		if err := a.next.forward(out); err != nil {
			return err
		}
	}
	if a.final != nil {
		if err := a.final.forward(a.env, a.next, a.ks, a.as, a.res, a.observed-g, d); err != nil {
			return err
		}
	}
	if err := a.recs.ExpireBefore(a.observed - g - d - 1); err != nil {
		return errorf(a.env.node, "expire records: %w", err)
	}
	if err := a.res.ExpireBefore(a.observed - g - d); err != nil {
		return errorf(a.env.node, "expire windows: %w", err)
	}
	return nil
}

// leftStart is the start of the left window of a record at ts: ts−d, or 0
// for a record earlier than d (Kafka Streams' processEarly puts such records
// in the window [0, d], as windows do not start before 0).
func (a *slidingAgg[K, V, VA]) leftStart(ts int64) int64 {
	return max(ts-a.w.diff, 0)
}

// previous reads the aggregate window start of key kb holds, if any.
func (a *slidingAgg[K, V, VA]) previous(kb []byte, start int64) (VA, bool, error) {
	var old VA
	raw, found, err := a.res.Fetch(kb, start)
	if err != nil {
		return old, false, errorf(a.env.node, "fetch window %d: %w", start, err)
	}
	if !found {
		return old, false, nil
	}
	_, vb, err := DecodeTimestamped(raw)
	if err == nil {
		old, err = a.as.Decode(vb)
	}
	if err != nil {
		return old, false, errorf(a.env.node, "decode window %d: %w", start, err)
	}
	// A null window (stored before null aggregates were deleted) is none.
	return old, !isNull(a.null, old), nil
}
