package topology

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Output watermarks.
//
// A task's output watermark for a sink is a time W such that every record
// with timestamp ≤ W the task will ever write to the sink has already been
// written: once the transaction holding those writes commits, "the sink is
// covered up to W" as far as this task is concerned. OutputBounds derives W
// from the sub-topology's graph, bottom-up from the sources to each sink,
// as a lower bound on the timestamps of the records a node can still emit
// (W is that bound minus one):
//
//	source (input topic i)          stream time of i − allowed lateness (a record yet to come may
//	                                still carry exactly that: W is one below it); ⊤ (no constraint)
//	                                when the runtime declares i idle (and the bound itself, not one
//	                                below, where an idle input's own reach is asked: it is caught
//	                                up); no bound (math.MinInt64) before i's first record. Records
//	                                below it are outside the claim: they are the declared disorder
//	                                bound.
//	stateless or non-windowed node  min over its parents (a filter, map, flatMap, branch, merge,
//	                                stream-table and table-table join, non-windowed aggregation,
//	                                toStream, repartition, deduplicate: each output's timestamp is
//	                                that of the record that caused it, or the max of it and stored
//	                                rows')
//	tumbling/hopping window         with c = the operator's clock (largest timestamp it has seen),
//	(size s, advance a, grace g)    x = c − g − s, the first open window starts at
//	                                F = max(⌊x/a⌋·a + a, 0), and W = F − 1
//	sliding window (diff d, grace g) W = c − g − d − 1
//	session, emit-final (gap, g)    W = c − g − gap − 1
//	session, every update (gap)     W = parent − gap
//	stream-stream join (before b,   inner: the min over its sides of max(the side's parent,
//	after af, grace g)              co − g − r − 1), co the other side's store clock (the parent's
//	                                alone while that store has had no record), r = max(b + af, b,
//	                                af) the stores' reach; left and outer: the min of that,
//	                                c − g − r − 1 (c the join's shared clock) and the parents'
//	                                (b or af may be negative; b + af ≥ 0)
//	table suppress                  min(parent, H − 1), H the smallest timestamp buffered (a clock);
//	                                the parent's when nothing is buffered
//
// Why, from the operators' code:
//
//   - Window aggregations (window_agg.go) close window [start, start+s) once
//     start+s ≤ c − g, both for dropping late records and for the final
//     results EmitFinal forwards (windows with start ≤ c − g − s). A result
//     carries the largest timestamp in its window, never less than start.
//     So everything a closed window will ever emit is emitted, and any
//     later result (final or update) comes from an open window, whose start
//     is at least F, the first multiple of a above c − g − s: W = F − 1. For
//     a 10 s tumbling window with 5 s grace, W stays below 9 999 until c
//     reaches 15 000, the record that makes [0, 10 000) final. The bound
//     depends on the clock alone: records the operator receives later are
//     either dropped as late or land in open windows, however far behind
//     the upstream watermark they are, and an open window's result is not
//     written before a record moves the clock (an idle input does not
//     close windows, so it does not release them either). Emit-final and
//     eager emission share the bound.
//   - Sliding windows (sliding_agg.go) are [t−d, t] and [t+1, t+1+d]; a
//     window is closed when end + g < c, and a record t is dropped when
//     t + d + g < c. Every update carries the largest timestamp in its
//     window (≥ its start), every final result is forwarded once end < c − g,
//     and an open window starts at ≥ c − g − d.
//   - Emit-final sessions (session_agg.go) forward a session once its end
//     ≤ c − g − gap, with the end as timestamp; a record is dropped unless
//     its merged session ends after c − g − gap, and that session is
//     forwarded later with its end, > c − g − gap.
//   - Eager sessions also forward a retraction of every session a new
//     record t merges away, timestamped with that session's end (≥ t − gap),
//     and the merge can reach back arbitrarily far through a long session:
//     the clock bounds nothing here, the input does. A future record has
//     t > parent, so every future output is ≥ parent + 1 − gap.
//   - Stream-stream joins (join_stream.go) have no lateness check (Kafka
//     Streams' has none): any record joins what the other input's store
//     retains, records at ≥ cs − g − r (the expiry cut of that store, by
//     its own clock cs, the largest timestamp stored into it, as Kafka
//     Streams' stores expire), and a join's timestamp is the later of the
//     pair's: every joined output yet to come pairs a record yet to come
//     on one input (bounded by that input) with one the other store holds
//     now or later (≥ its cut now: a store with no record yet stores its
//     first ones however old), and is ≥ both. Left and
//     outer joins also emit unjoined records with their own timestamp t:
//     those waiting once t + ahead + g < c (ahead = after for left records,
//     before for right ones), checked on every clock advance, so the ones
//     still waiting have t ≥ c − g − ahead ≥ c − g − r; and a record yet
//     to come that joins nothing, or has a null key, at once, bounded only
//     by the input. The clock bound holds only while every clock advance
//     runs the check for due unjoined records.
//
//   - Deduplicate (dedup.go) keeps state but no operator clock: it forwards
//     a record unchanged, with its own timestamp, as it arrives, or drops
//     it, and emits nothing later (no punctuator). Its output is a subset
//     of its input, so its parent's bound holds, as for a filter.
//
//   - Table.Suppress (suppress.go) forwards a buffered update later, with
//     the timestamp of its key's latest update: every record still
//     buffered has a timestamp ≥ H, every future one comes from an update
//     bounded by the parent.
//
// A user processor (Stream.Process) is treated as stateless: records it
// forwards, from Process or a punctuator, must not be timestamped below the
// record it is processing, or they are outside the claim like late input.
//
// Repartition topics chain sub-topologies: a downstream task's source is
// the repartition partition, whose stream time is the largest timestamp any
// upstream task wrote to it, so the upstream bound reaches it only through
// that stream time. That is sound within the allowed lateness, not beyond:
// several upstream tasks interleave in one repartition partition, and a
// record from an upstream task that lags the others by more than the
// allowed lateness arrives behind the downstream watermark: it is late in
// the same sense as late input (windowed operators downstream drop it as
// late too, if it is also beyond their grace). Set the allowed lateness to
// cover the skew between input partitions when a sink lies behind a
// repartition without a windowed operator in between.

// OutputBound derives one sink's output watermark for a task of one
// sub-topology from the task's clocks. The zero value has no bound.
type OutputBound struct {
	e        *boundExpr
	lateness int64
}

// BoundEnv is the task state an OutputBound reads.
type BoundEnv interface {
	// InputTime is the stream time of an input topic of the task (−1
	// before its first record), and whether the runtime declared the
	// input partition idle.
	InputTime(topic string) (streamTime int64, idle bool)
	// OperatorClock is the clock a windowed operator keeps under name
	// (ClockKeeper), −1 before its first record.
	OperatorClock(name string) int64
}

// Eval returns the task's output watermark (math.MinInt64: none) and
// whether it is idle: every path from an input to the sink runs through an
// idle input with no windowed operator on the way (an idle input is ⊤ in
// the minimum). An idle result is the watermark computed as if the idle
// inputs were not idle: how far the task got on its own.
func (b OutputBound) Eval(env BoundEnv) (wm int64, idle bool) {
	if b.e == nil {
		return math.MinInt64, false
	}
	if v, top := b.e.eval(env, b.lateness, idleTop, 0); !top {
		return v, false
	}
	v, _ := b.e.eval(env, b.lateness, idleIgnored, 0)
	return v, true
}

// Following is the watermark with every idle input contributing s instead
// of its own stream time: an idle task follows the watermark s the other
// tasks of the sink reached, through the operators on its path (an eager
// session subtracts its gap), so that a record that arrives later on the
// idle input at or below s is late.
func (b OutputBound) Following(env BoundEnv, s int64) int64 {
	if b.e == nil {
		return math.MinInt64
	}
	v, _ := b.e.eval(env, b.lateness, idleFollows, s)
	return v
}

// String renders the bound's formula, for logs and tests.
func (b OutputBound) String() string {
	if b.e == nil {
		return "none"
	}
	return b.e.String()
}

// SubTopologyBounds are a sub-topology's output bounds.
type SubTopologyBounds struct {
	// Sinks maps every topic the sub-topology writes (repartition topics
	// included) to its bound.
	Sinks map[string]OutputBound
	// Clocks are the operator clocks the bounds read, sorted. A task that
	// keeps a clock not listed runs an operator the derivation does not
	// know, and must not claim a watermark.
	Clocks []string
}

// OutputBounds derives the output bounds of sub-topology sub (see the
// formulas above).
func (t *Topology) OutputBounds(sub int) (SubTopologyBounds, error) {
	if sub < 0 || sub >= len(t.subs) {
		return SubTopologyBounds{}, fmt.Errorf("%w: no sub-topology %d", ErrInvalidTopology, sub)
	}
	d := boundDeriver{t: t, memo: map[*node]*boundExpr{}, clocks: map[string]bool{}}
	out := SubTopologyBounds{Sinks: map[string]OutputBound{}}
	for _, n := range t.subs[sub].nodes {
		if n.kind != KindSink {
			continue
		}
		e, err := d.bound(n)
		if err != nil {
			return SubTopologyBounds{}, err
		}
		topic := n.topics[0]
		if prev, ok := out.Sinks[topic]; ok {
			e = minOf(prev.e, e)
		}
		out.Sinks[topic] = OutputBound{e: e, lateness: t.lateness.Milliseconds()}
	}
	for c := range d.clocks {
		out.Clocks = append(out.Clocks, c)
	}
	sort.Strings(out.Clocks)
	return out, nil
}

type boundOp int

const (
	boundInput        boundOp = iota + 1 // topic's stream time − lateness
	boundMin                             // min over args
	boundTimeWindow                      // tumbling/hopping aggregation clock
	boundSliding                         // sliding aggregation clock
	boundSessionFinal                    // emit-final session aggregation clock
	boundSessionEager                    // args[0] − gap
	boundJoin                            // stream-stream join side: max(args[0], the other store's cut)
	boundJoinPending                     // left/outer join's shared clock: its waiting unjoined records
	boundHeld                            // suppress: smallest buffered timestamp − 1
)

type boundExpr struct {
	op    boundOp
	topic string // boundInput
	clock string // clock-based ops: the ClockKeeper name
	// clock2 is the second clock of a join side: clock is its own
	// input's store clock, clock2 the other input's.
	clock2 string
	// size, advance: time windows; size: sliding (diff); gap: sessions;
	// reach: joins (JoinWindows.reach).
	size, advance, grace, gap, reach int64
	args                             []*boundExpr
}

func minOf(a, b *boundExpr) *boundExpr {
	args := []*boundExpr{}
	for _, e := range []*boundExpr{a, b} {
		if e.op == boundMin {
			args = append(args, e.args...)
		} else {
			args = append(args, e)
		}
	}
	return &boundExpr{op: boundMin, args: args}
}

// How eval treats an idle input.
const (
	idleTop     = iota // ⊤: no constraint
	idleIgnored        // like any input: stream time − lateness
	idleFollows        // the given value
)

// eval returns the bound, or top when no input constrains it (idleTop
// only).
func (e *boundExpr) eval(env BoundEnv, lateness int64, mode int, follow int64) (v int64, top bool) {
	switch e.op {
	case boundInput:
		st, idle := env.InputTime(e.topic)
		switch {
		case idle && mode == idleTop:
			return 0, true
		case idle && mode == idleFollows:
			return follow, false
		case st < 0:
			return math.MinInt64, false
		case idle:
			// Caught up and quiet: a record yet to come at the stream
			// time itself is late, as any below the published mark is.
			return st - lateness, false
		}
		// A record yet to come may carry the stream time itself (a
		// producer stamps many records in one millisecond): the bound is
		// st − lateness, so the watermark is one below it.
		return st - lateness - 1, false
	case boundMin:
		v, top = math.MaxInt64, true
		for _, a := range e.args {
			av, atop := a.eval(env, lateness, mode, follow)
			if !atop {
				v, top = min(v, av), false
			}
		}
		return v, top
	case boundTimeWindow:
		x := env.OperatorClock(e.clock) - e.grace - e.size
		return max(floorDiv(x, e.advance)*e.advance+e.advance, 0) - 1, false
	case boundSliding:
		return env.OperatorClock(e.clock) - e.grace - e.size - 1, false
	case boundSessionFinal:
		return env.OperatorClock(e.clock) - e.grace - e.gap - 1, false
	case boundJoin:
		// Every pair yet to come is a record yet to come on one side (this
		// one: args[0] bounds it) joining one the other side's store holds
		// now or will: at or above that store's cut by its clock now
		// (clock2; none while it has had no record). The pair has the
		// later timestamp of the two.
		pv, ptop := e.args[0].eval(env, lateness, mode, follow)
		if ptop {
			return 0, true // no record to come on this side
		}
		if theirs := env.OperatorClock(e.clock2); theirs >= 0 {
			return max(pv, theirs-e.grace-e.reach-1), false
		}
		return pv, false
	case boundJoinPending:
		return env.OperatorClock(e.clock) - e.grace - e.reach - 1, false
	case boundHeld:
		switch h := env.OperatorClock(e.clock); {
		case h == math.MaxInt64: // nothing buffered
			return 0, true
		case h < 0: // not known yet
			return math.MinInt64, false
		default:
			return h - 1, false
		}
	case boundSessionEager:
		pv, ptop := e.args[0].eval(env, lateness, mode, follow)
		if ptop || pv == math.MinInt64 {
			return pv, ptop
		}
		return pv - e.gap, false
	}
	return math.MinInt64, false
}

func floorDiv(x, d int64) int64 {
	q := x / d
	if x%d != 0 && (x < 0) != (d < 0) {
		q--
	}
	return q
}

func (e *boundExpr) String() string {
	switch e.op {
	case boundInput:
		return "input(" + e.topic + ")"
	case boundMin:
		parts := make([]string, len(e.args))
		for i, a := range e.args {
			parts[i] = a.String()
		}
		return "min(" + strings.Join(parts, ", ") + ")"
	case boundTimeWindow:
		return fmt.Sprintf("window(%s size=%d advance=%d grace=%d)", e.clock, e.size, e.advance, e.grace)
	case boundSliding:
		return fmt.Sprintf("sliding(%s diff=%d grace=%d)", e.clock, e.size, e.grace)
	case boundSessionFinal:
		return fmt.Sprintf("session-final(%s gap=%d grace=%d)", e.clock, e.gap, e.grace)
	case boundSessionEager:
		return fmt.Sprintf("session-eager(gap=%d, %s)", e.gap, e.args[0])
	case boundJoin:
		return fmt.Sprintf("join(%s reach=%d grace=%d, %s)", e.clock2, e.reach, e.grace, e.args[0])
	case boundJoinPending:
		return fmt.Sprintf("join-pending(%s reach=%d grace=%d)", e.clock, e.reach, e.grace)
	case boundHeld:
		return fmt.Sprintf("held(%s)", e.clock)
	}
	return "?"
}

type boundDeriver struct {
	t      *Topology
	memo   map[*node]*boundExpr
	clocks map[string]bool
}

func (d *boundDeriver) bound(n *node) (*boundExpr, error) {
	if e, ok := d.memo[n]; ok {
		return e, nil
	}
	e, err := d.derive(n)
	if err != nil {
		return nil, err
	}
	d.memo[n] = e
	return e, nil
}

func (d *boundDeriver) parents(n *node) (*boundExpr, error) {
	if len(n.parents) == 0 {
		return nil, errorf(n.name, "%w: %s node without parents", ErrInvalidTopology, n.op)
	}
	var e *boundExpr
	for _, p := range n.parents {
		pe, err := d.bound(p)
		if err != nil {
			return nil, err
		}
		if e == nil {
			e = pe
		} else {
			e = minOf(e, pe)
		}
	}
	return e, nil
}

func (d *boundDeriver) derive(n *node) (*boundExpr, error) {
	if n.kind == KindSource {
		var e *boundExpr
		for _, topic := range n.topics {
			te := &boundExpr{op: boundInput, topic: topic}
			if e == nil {
				e = te
			} else {
				e = minOf(e, te)
			}
		}
		return e, nil
	}
	var cb clockBounder
	if b, ok := n.impl.(clockBounder); ok {
		cb = b
	} else if isWindowedOp(n.op) {
		inst, err := n.impl.instantiate(&opEnv{TaskEnv: inertEnv{t: d.t}, node: n.name, shared: map[string]any{}}, nil)
		if err != nil {
			return nil, fmt.Errorf("derive output bound: %w", err)
		}
		if cb, ok = inst.(clockBounder); !ok {
			return nil, errorf(n.name, "%w: windowed operator %T has no output bound", ErrInvalidTopology, inst)
		}
	}
	if cb == nil {
		return d.parents(n)
	}
	parent, err := d.parents(n)
	if err != nil {
		return nil, err
	}
	d.clocks[cb.clockName()] = true
	e := cb.outputBound(parent)
	for _, a := range append([]*boundExpr{e}, e.args...) {
		switch a.op {
		case boundHeld:
			d.clocks[a.clock] = true
		case boundJoin:
			d.clocks[a.clock], d.clocks[a.clock2] = true, true
		case boundJoinPending:
			d.clocks[a.clock] = true
		}
	}
	return e, nil
}

// isWindowedOp names the operators whose parameters live in the closure
// that instantiates them (window_agg.go, session_agg.go, sliding_agg.go):
// OutputBounds instantiates them once against inert stores to ask the
// instance (clockBounder) rather than duplicating the window parameters on
// the graph node.
func isWindowedOp(op string) bool {
	for _, p := range []string{"WINDOW-", "SESSION-", "SLIDING-"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// clockBounder is implemented by the operators that keep a clock: their
// output bound depends on it (and, for eager sessions and left or outer
// joins, on parent), and clockName is the name they keep it under.
type clockBounder interface {
	outputBound(parent *boundExpr) *boundExpr
	clockName() string
}

func (a *winAgg[K, V, VA]) clockName() string         { return a.st.Name() }
func (a *slidingAgg[K, V, VA]) clockName() string     { return a.res.Name() }
func (a *sessionAgg[K, V, VA]) clockName() string     { return a.st.Name() }
func (j *ssJoinSide[K, V, V2, VR]) clockName() string { return j.op.name }

func (a *winAgg[K, V, VA]) outputBound(*boundExpr) *boundExpr {
	return &boundExpr{op: boundTimeWindow, clock: a.st.Name(), size: a.w.size, advance: a.w.advance, grace: a.w.grace}
}

func (a *slidingAgg[K, V, VA]) outputBound(*boundExpr) *boundExpr {
	return &boundExpr{op: boundSliding, clock: a.res.Name(), size: a.w.diff, grace: a.w.grace}
}

func (a *sessionAgg[K, V, VA]) outputBound(parent *boundExpr) *boundExpr {
	if a.index != nil {
		return &boundExpr{op: boundSessionFinal, clock: a.st.Name(), gap: a.w.gap, grace: a.w.grace}
	}
	return &boundExpr{op: boundSessionEager, gap: a.w.gap, args: []*boundExpr{parent}}
}

func (j *ssJoinSide[K, V, V2, VR]) outputBound(parent *boundExpr) *boundExpr {
	w := j.op.w
	mine, theirs := j.op.thisStore, j.op.otherStore
	if !j.left {
		mine, theirs = theirs, mine
	}
	e := &boundExpr{op: boundJoin, clock: mine, clock2: theirs, grace: w.grace, reach: w.reach(), args: []*boundExpr{parent}}
	if j.op.kind == innerJoin {
		return e
	}
	// Left and outer joins also emit a record yet to come unjoined with its
	// own timestamp when it joins nothing, however far behind the clock (a
	// null key, KIP-962; a record behind the stores' cut): bounded by the
	// input; and the unjoined records waiting until t + ahead + g < c, the
	// shared clock, from c − g − after (left) or c − g − before (right),
	// never below c − g − reach.
	pending := &boundExpr{op: boundJoinPending, clock: j.op.name, grace: w.grace, reach: w.reach()}
	return minOf(minOf(e, pending), parent)
}

// inertEnv is the TaskEnv a windowed operator is instantiated against to
// read its parameters: stores that hold nothing and accept nothing, no
// clock keeper, no output. The instance is dropped at once.
type inertEnv struct{ t *Topology }

var errInert = errors.New("topology: inert environment (output bound derivation)")

func (e inertEnv) TaskID() TaskID { return TaskID{} }
func (e inertEnv) Store(name string) (store.Store, error) {
	info, ok := e.t.stores[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, name)
	}
	switch info.Spec.Kind {
	case store.KindKeyValue:
		return inertKV{name}, nil
	case store.KindWindow:
		return inertWindow{name}, nil
	case store.KindSession:
		return inertSession{name}, nil
	}
	return nil, fmt.Errorf("%w: store %q of kind %s", errInert, name, info.Spec.Kind)
}
func (e inertEnv) Schedule(time.Duration, PunctuationType, Punctuator) (Cancellable, error) {
	return nil, errInert
}
func (e inertEnv) ObserveTimestamp(int64)                         {}
func (e inertEnv) StreamTime() int64                              { return -1 }
func (e inertEnv) WallClock() int64                               { return 0 }
func (e inertEnv) Meta() (RecordMeta, bool)                       { return RecordMeta{}, false }
func (e inertEnv) Emit(*OutputRecord) error                       { return errInert }
func (e inertEnv) PartitionCount(string) (int32, error)           { return 1, nil }
func (e inertEnv) Dropped(string, DropReason)                     {}
func (inertKV) Kind() store.Kind                                  { return store.KindKeyValue }
func (inertWindow) Kind() store.Kind                              { return store.KindWindow }
func (inertSession) Kind() store.Kind                             { return store.KindSession }
func (s inertKV) Name() string                                    { return s.name }
func (s inertWindow) Name() string                                { return s.name }
func (s inertSession) Name() string                               { return s.name }
func (inertKV) Close() error                                      { return nil }
func (inertWindow) Close() error                                  { return nil }
func (inertSession) Close() error                                 { return nil }
func (inertKV) Get([]byte) ([]byte, bool, error)                  { return nil, false, nil }
func (inertKV) Put(_, _ []byte) error                             { return errInert }
func (inertKV) Delete([]byte) error                               { return errInert }
func (inertKV) Range(_, _ []byte, _ func(_, _ []byte) bool) error { return nil }
func (inertWindow) Put([]byte, int64, []byte) error               { return errInert }
func (inertWindow) Fetch([]byte, int64) ([]byte, bool, error) {
	return nil, false, nil
}
func (inertWindow) FetchRange([]byte, int64, int64, func(int64, []byte) bool) error { return nil }
func (inertWindow) FetchAll(int64, int64, func([]byte, int64, []byte) bool) error   { return nil }
func (inertWindow) ExpireBefore(int64) error                                        { return nil }
func (inertSession) FindSessions([]byte, int64, int64, func(int64, int64, []byte) bool) error {
	return nil
}
func (inertSession) Put([]byte, int64, int64, []byte) error { return errInert }
func (inertSession) Remove([]byte, int64, int64) error      { return errInert }
func (inertSession) ExpireBefore(int64) error               { return nil }

type (
	inertKV      struct{ name string }
	inertWindow  struct{ name string }
	inertSession struct{ name string }
)
