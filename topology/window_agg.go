package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// WindowedStream is a grouped stream cut into time windows.
type WindowedStream[K, V any] struct {
	g GroupedStream[K, V]
	w TimeWindows
}

// WindowedBy cuts a grouped stream into tumbling or hopping windows:
//
//	topology.WindowedBy(payments.GroupByKey(), topology.TumblingWindows(time.Minute, 10*time.Second)).Count()
//
// It is a function, not a GroupedStream method, because Go rejects the
// method form as an instantiation cycle: GroupedStream[K] would refer to
// WindowedStream[K], whose Count yields Table[Windowed[K]], whose ToStream
// groups into GroupedStream[Windowed[K]], and so on without end.
func WindowedBy[K, V any](g GroupedStream[K, V], w TimeWindows) WindowedStream[K, V] {
	return WindowedStream[K, V]{g: g, w: w}
}

// Count counts records per key and window.
func (ws WindowedStream[K, V]) Count(opts ...WindowOption) Table[Windowed[K], int64] {
	return aggregateWindowed(ws, "WINDOW-COUNT", func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64(), opts)
}

// Reduce combines the values of each key and window.
func (ws WindowedStream[K, V]) Reduce(f func(agg, v V) V, opts ...WindowOption) Table[Windowed[K], V] {
	return aggregateWindowed(ws, "WINDOW-REDUCE", nil, func(_ K, v V, agg V) V { return f(agg, v) }, ws.g.s.vs, opts)
}

// Aggregate folds each key's records per window, starting from init().
// Each window's output timestamp is the largest timestamp in it. By default
// every update is emitted; with EmitFinal, one result per window once it
// closes.
func (ws WindowedStream[K, V]) Aggregate[VA any](init func() VA, add func(K, V, VA) VA, aggSerde serde.Serde[VA], opts ...WindowOption) Table[Windowed[K], VA] {
	return aggregateWindowed(ws, "WINDOW-AGGREGATE", zeroInit(init), add, aggSerde, opts)
}

func aggregateWindowed[K, V, VA any](ws WindowedStream[K, V], op string, init func() VA, add func(K, V, VA) VA, aggSerde serde.Serde[VA], opts []WindowOption) Table[Windowed[K], VA] {
	s, w := ws.g.s, ws.w
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg, nil)
	if err := w.validate(); err != nil {
		s.b.fail(errorf(n.name, "%w", err))
	}
	retention := windowRetention(s.b, n.name, cfg, w.grace)
	name := s.b.addStore(n, cfg, "", store.Spec{Kind: store.KindWindow, WindowSize: w.size, Retention: retention}, true)
	var cursorStore string
	if cfg.emitFinal {
		cursorStore = s.b.addStore(n, cfg, "-EMIT-CURSOR", kvSpec(), false)
	}
	requireAggSerdes(s.b, n.name, name, s.ks, aggSerde)
	n.impl = opFunc[K, V, Windowed[K], change[VA]](func(env *opEnv, next forwarder[Windowed[K], change[VA]]) (receiver[K, V], error) {
		st, err := env.window(name)
		if err != nil {
			return nil, err
		}
		final, err := openFinalEmitter(env, cursorStore, w.size, w.advance)
		if err != nil {
			return nil, err
		}
		a := &winAgg[K, V, VA]{env: env, next: next, st: st, final: final, w: w, retention: retention,
			ks: s.ks, vs: aggSerde, init: init, add: add, null: keyNull[VA]()}
		a.observed = operatorClock(env, name, func() int64 { return a.observed })
		return a, nil
	})
	ks := timeWindowedKeys(s.ks, w.size)
	return Table[Windowed[K], VA]{b: s.b, n: n, ks: ks, vs: aggSerde, store: name,
		src: &windowGetters[K, VA]{name: name, ks: s.ks, vs: aggSerde}}
}

// winAgg is the task instance of a time-window aggregation.
type winAgg[K, V, VA any] struct {
	env       *opEnv
	next      forwarder[Windowed[K], change[VA]]
	st        store.Window
	final     *finalEmitter // nil: emit every update
	w         TimeWindows
	retention int64
	ks        serde.Serde[K]
	vs        serde.Serde[VA]
	init      func() VA
	add       func(K, V, VA) VA
	// null tests for a null aggregate (nil: VA is never null), which
	// deletes its window as Kafka Streams' put of a null does.
	null func(VA) bool
	// observed is the operator's stream time, as in Kafka Streams: the
	// largest timestamp this operator has seen.
	observed   int64
	starts     []int64
	kbuf, vbuf []byte
}

func (a *winAgg[K, V, VA]) process(r Record[K, V]) error {
	if dropNullKey(a.env, &r) { // before the clock: Kafka Streams checks the key first
		return nil
	}
	if r.Tombstone {
		a.env.Dropped(a.env.node, DropSkipped)
		return nil
	}
	a.observed = max(a.observed, r.Timestamp)
	closeTime := a.observed - a.w.grace
	var err error
	if a.kbuf, err = a.ks.Encode(a.kbuf[:0], r.Key); err != nil {
		return errorf(a.env.node, "encode key: %w", err)
	}
	kb := storeKey(a.kbuf)
	late := false
	a.starts = a.w.starts(a.starts[:0], r.Timestamp)
	for _, start := range a.starts {
		end := start + a.w.size
		if end <= closeTime {
			late = true
			continue
		}
		var old VA
		ts := r.Timestamp
		raw, found, err := a.st.Fetch(kb, start)
		if err != nil {
			return errorf(a.env.node, "fetch window %d: %w", start, err)
		}
		if found {
			oldTS, vb, err := DecodeTimestamped(raw)
			if err == nil {
				old, err = a.vs.Decode(vb)
			}
			if err != nil {
				return errorf(a.env.node, "decode window %d: %w", start, err)
			}
			// A null window (stored before null aggregates were
			// deleted) is no aggregate.
			if found = !isNull(a.null, old); found {
				ts = max(ts, oldTS)
			}
		}
		agg := fold(a.init, a.add, r.Key, r.Value, old, found)
		kept := !isNull(a.null, agg)
		if kept {
			if a.vbuf, err = appendValueTS(a.vbuf, a.vs, ts, agg); err != nil {
				return errorf(a.env.node, "encode aggregate: %w", err)
			}
		}
		stored := a.vbuf
		if !kept {
			stored = nil // deletes the window
		}
		if err := a.st.Put(kb, start, stored); err != nil {
			return errorf(a.env.node, "put window %d: %w", start, err)
		}
		if a.final == nil {
			out := Record[Windowed[K], change[VA]]{Key: Windowed[K]{Key: r.Key, Start: start, End: end}, Timestamp: ts, Headers: r.Headers,
				Value: change[VA]{newV: agg, hasNew: kept, oldV: old, hasOld: found}}
			if err := a.next.forward(out); err != nil {
				return err
			}
		}
	}
	if late {
		a.env.Dropped(a.env.node, DropLate)
	}
	if a.final != nil {
		if err := a.final.forward(a.env, a.next, a.ks, a.vs, a.st, closeTime, a.w.size); err != nil {
			return err
		}
	}
	if err := a.st.ExpireBefore(a.observed - a.retention - a.w.size + 1); err != nil {
		return errorf(a.env.node, "expire windows: %w", err)
	}
	return nil
}

// finalEmitter emits the final results of closed windows exactly once. A
// window of span w starting at s is closed once closeTime ≥ s + w; the
// close time up to which results were emitted is kept in a key-value store,
// so a restarted task neither repeats nor skips results.
type finalEmitter struct {
	kv     store.KeyValue
	cursor int64
	span   int64
	// advance, when > 0, is the grid of window starts: every window
	// starts at a non-negative multiple of it (time windows). Between two
	// grid points no window can close, so the emitter neither scans the
	// store nor stores its cursor until the close time crosses the next
	// one. Without it (sliding windows start anywhere) every advance of
	// the close time is a scan and a cursor write: with a record per
	// millisecond of stream time, a thousand of each per second.
	advance int64
}

var cursorKey = []byte("emit-cursor")

// openFinalEmitter opens the emitter of an EmitFinal window aggregation
// from its cursor store, or returns nil when the aggregation emits every
// update (no cursor store).
func openFinalEmitter(env *opEnv, cursorStore string, span, advance int64) (*finalEmitter, error) {
	if cursorStore == "" {
		return nil, nil
	}
	kv, err := env.keyValue(cursorStore)
	if err != nil {
		return nil, err
	}
	f, err := newFinalEmitter(kv, span)
	if err != nil {
		return nil, errorf(env.node, "%w", err)
	}
	f.advance = advance
	return f, nil
}

func newFinalEmitter(kv store.KeyValue, span int64) (*finalEmitter, error) {
	f := &finalEmitter{kv: kv, cursor: math.MinInt64, span: span}
	b, ok, err := kv.Get(cursorKey)
	if err != nil {
		return nil, fmt.Errorf("load emit cursor: %w", err)
	}
	if ok && len(b) == 8 {
		f.cursor = int64(binary.BigEndian.Uint64(b))
	}
	return f, nil
}

type closedWindow struct {
	key   []byte
	start int64
	value []byte
}

// emit calls fn for every window that closed since the last call, ordered
// by window start then key, and persists the new cursor.
func (f *finalEmitter) emit(st store.Window, closeTime int64, fn func(key []byte, start int64, value []byte) error) error {
	if closeTime <= f.cursor {
		return nil
	}
	lo := int64(math.MinInt64)
	if f.cursor != math.MinInt64 {
		lo = f.cursor - f.span + 1
	}
	hi := closeTime - f.span
	if !f.mayStartIn(lo, hi) {
		// Nothing can have closed. The stored cursor stays behind: a
		// restarted task scans from it, over starts where no window is.
		f.cursor = closeTime
		return nil
	}
	var closed []closedWindow
	if hi >= lo {
		err := st.FetchAll(lo, hi, func(k []byte, start int64, v []byte) bool {
			closed = append(closed, closedWindow{key: bytes.Clone(k), start: start, value: bytes.Clone(v)})
			return true
		})
		if err != nil {
			return fmt.Errorf("scan closed windows: %w", err)
		}
	}
	sort.SliceStable(closed, func(i, j int) bool {
		if closed[i].start != closed[j].start {
			return closed[i].start < closed[j].start
		}
		return bytes.Compare(closed[i].key, closed[j].key) < 0
	})
	for _, c := range closed {
		if err := fn(c.key, c.start, c.value); err != nil {
			return err
		}
	}
	f.cursor = closeTime
	if err := f.kv.Put(cursorKey, binary.BigEndian.AppendUint64(nil, uint64(closeTime))); err != nil {
		return fmt.Errorf("store emit cursor: %w", err)
	}
	return nil
}

// mayStartIn reports whether a window can start in [lo, hi]: always on a
// non-empty range without a grid, else when a grid point lies in it.
func (f *finalEmitter) mayStartIn(lo, hi int64) bool {
	if hi < lo {
		return false
	}
	if f.advance <= 0 || lo == math.MinInt64 {
		return true
	}
	if hi < 0 {
		return false
	}
	lo = max(lo, 0)
	first := lo + (f.advance-lo%f.advance)%f.advance
	return first <= hi
}

// forward emits through next the final result of every window of st that
// closed since the last call, and tells the runtime how many went out. A
// window starting at s is forwarded as [s, s+length]: length is the span
// for time windows (end exclusive) and one less for sliding windows (end
// inclusive).
func (f *finalEmitter) forward[K, VA any](env *opEnv, next forwarder[Windowed[K], change[VA]], ks serde.Serde[K], vs serde.Serde[VA], st store.Window, closeTime, length int64) error {
	defer setTenant(env.TaskEnv, untenanted(env.TaskEnv))
	closed := 0
	err := f.emit(st, closeTime, func(kb []byte, start int64, v []byte) error {
		out, err := decodeWindowed(ks, vs, kb, start, start+length, v)
		if err != nil {
			return errorf(env.node, "%w", err)
		}
		closed++
		return next.forward(out)
	})
	windowsClosed(env.TaskEnv, closed)
	if err != nil {
		return errorf(env.node, "emit final results: %w", err)
	}
	return nil
}

// decodeWindowed turns a stored window into the record a windowed table
// forwards.
func decodeWindowed[K, VA any](ks serde.Serde[K], vs serde.Serde[VA], kb []byte, start, end int64, raw []byte) (Record[Windowed[K], change[VA]], error) {
	var out Record[Windowed[K], change[VA]]
	k, err := ks.Decode(kb)
	if err != nil {
		return out, fmt.Errorf("decode key: %w", err)
	}
	ts, vb, err := DecodeTimestamped(raw)
	var agg VA
	if err == nil {
		agg, err = vs.Decode(vb)
	}
	if err != nil {
		return out, fmt.Errorf("decode window %d: %w", start, err)
	}
	return Record[Windowed[K], change[VA]]{Key: Windowed[K]{Key: k, Start: start, End: end}, Timestamp: ts,
		Value: change[VA]{newV: agg, hasNew: true}}, nil
}

// windowGetters reads a windowed table by (key, window start).
type windowGetters[K, V any] struct {
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

func (g *windowGetters[K, V]) storeNames() []string { return []string{g.name} }

func (g *windowGetters[K, V]) newGetter(env *opEnv) (getter[Windowed[K], V], error) {
	st, err := env.window(g.name)
	if err != nil {
		return nil, err
	}
	return getterFunc[Windowed[K], V](func(k Windowed[K]) (v V, ts int64, found bool, err error) {
		kb, err := g.ks.Encode(nil, k.Key)
		if err != nil {
			return v, 0, false, err
		}
		raw, found, err := st.Fetch(kb, k.Start)
		if err != nil || !found {
			return v, 0, false, err
		}
		ts, vb, err := DecodeTimestamped(raw)
		if err == nil {
			v, err = g.vs.Decode(vb)
		}
		return v, ts, err == nil, err
	}), nil
}
