package topology

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// TimeWindowedCogroupedStream is a cogroup cut into tumbling or hopping
// windows: one shared aggregate per key and window.
type TimeWindowedCogroupedStream[K, VA any] struct {
	c CogroupedStream[K, VA]
	w TimeWindows
}

// CogroupWindowedBy cuts a cogroup into tumbling or hopping windows:
//
//	topology.CogroupWindowedBy(views.GroupByKey().Cogroup(addView).Cogroup(clicks.GroupByKey(), addClick),
//		topology.TumblingWindows(time.Minute, 10*time.Second)).
//		Aggregate(newStats, statsSerde, topology.Named("page-stats"))
//
// It is a function, not a CogroupedStream method, for the reason given at
// WindowedBy: Go rejects the method form as an instantiation cycle
// (GroupedStream[K].Cogroup yields CogroupedStream[K], whose windowed
// Aggregate yields Table[Windowed[K]], whose ToStream groups into
// GroupedStream[Windowed[K]], and so on without end).
func CogroupWindowedBy[K, VA any](c CogroupedStream[K, VA], w TimeWindows) TimeWindowedCogroupedStream[K, VA] {
	return TimeWindowedCogroupedStream[K, VA]{c: c, w: w}
}

// Aggregate folds every input's records into one aggregate per key and
// window, starting from init(), each record with its own input's adder, in
// the order the task processes them. Windows, grace, lateness and emission
// are exactly those of WindowedStream.Aggregate, whose machinery this is:
// a record updates every window containing its timestamp that has not yet
// closed (window end + grace > the operator's stream time, the largest
// timestamp it has seen from any input); a record too late for all of them
// is dropped (DropLate). By default each update is emitted, timestamped
// with the largest timestamp in its window; with EmitFinal, one result per
// window once it closes. WithRetention keeps closed windows queryable.
//
// The aggregates live in one window store (plus the emit cursor with
// EmitFinal), logged to changelogs like any windowed aggregation's. The
// operator's stream time is one clock for all inputs: a record of one
// input can make another input's records late. Co-partitioning is as for
// CogroupedStream.Aggregate.
//
// It takes WindowOptions, like the windowed Aggregate of a grouped stream:
// every StoreOption is one, and EmitFinal and WithRetention apply here too.
func (wc TimeWindowedCogroupedStream[K, VA]) Aggregate(init func() VA, aggSerde serde.Serde[VA], opts ...WindowOption) Table[Windowed[K], VA] {
	steps, ok := wc.c.merge(newOpConfig(opts))
	if !ok {
		return Table[Windowed[K], VA]{b: wc.c.b}
	}
	ws := WindowedStream[K, cogroupStep[K, VA]]{g: GroupedStream[K, cogroupStep[K, VA]]{s: steps}, w: wc.w}
	t := aggregateWindowed(ws, "WINDOW-COGROUP-AGGREGATE", zeroInit(init), applyStep[K, VA], aggSerde, opts)
	wc.c.check(t.n.name)
	return t
}

// SessionWindowedCogroupedStream is a cogroup cut into sessions: one shared
// aggregate per key and session.
type SessionWindowedCogroupedStream[K, VA any] struct {
	c CogroupedStream[K, VA]
	w SessionWindows
}

// CogroupSessionWindowedBy cuts a cogroup into sessions (see
// SessionWindowedStream; a function for the reason given at
// CogroupWindowedBy): a record of any input within the gap of a key's
// session extends it, and one that bridges sessions merges them.
func CogroupSessionWindowedBy[K, VA any](c CogroupedStream[K, VA], w SessionWindows) SessionWindowedCogroupedStream[K, VA] {
	return SessionWindowedCogroupedStream[K, VA]{c: c, w: w}
}

// Aggregate folds every input's records into one aggregate per key and
// session, starting from init(), each with its own input's adder; when a
// record bridges sessions, merge combines their aggregates (in session
// order) before the record is added. Sessions, grace, emission (every
// change, the replaced sessions as tombstones; or EmitFinal) and
// timestamps (a session's end) are exactly SessionWindowedStream.Aggregate's,
// whose machinery this is, with one clock for all inputs. Co-partitioning
// is as for CogroupedStream.Aggregate.
func (sc SessionWindowedCogroupedStream[K, VA]) Aggregate(init func() VA, merge func(key K, a, b VA) VA, aggSerde serde.Serde[VA], opts ...WindowOption) Table[Windowed[K], VA] {
	steps, ok := sc.c.merge(newOpConfig(opts))
	if !ok {
		return Table[Windowed[K], VA]{b: sc.c.b}
	}
	ss := SessionWindowedStream[K, cogroupStep[K, VA]]{g: GroupedStream[K, cogroupStep[K, VA]]{s: steps}, w: sc.w}
	t := aggregateSession(ss, "SESSION-COGROUP-AGGREGATE", zeroInit(init), applyStep[K, VA], merge, aggSerde, opts)
	sc.c.check(t.n.name)
	return t
}
