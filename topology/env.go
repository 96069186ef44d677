package topology

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// PunctuationType says which clock drives a punctuator.
type PunctuationType int

const (
	// StreamTime punctuators fire as stream time advances, driven purely by
	// data: with no input, they do not fire.
	StreamTime PunctuationType = iota + 1
	// WallClockTime punctuators fire as the runtime's clock advances (the test
	// driver's AdvanceWallClock).
	WallClockTime
)

func (p PunctuationType) String() string {
	switch p {
	case StreamTime:
		return "stream-time"
	case WallClockTime:
		return "wall-clock-time"
	}
	return "unknown"
}

// Punctuator is called with the time (stream or wall clock, ms) that made it
// fire.
type Punctuator func(timestamp int64) error

// Cancellable cancels a scheduled punctuator.
type Cancellable interface{ Cancel() }

// DropReason says why a record was dropped rather than processed.
type DropReason int

const (
	// DropLate: the record arrived after its window (plus grace) closed.
	DropLate DropReason = iota + 1
	// DropInvalidTimestamp: the extracted timestamp was negative.
	DropInvalidTimestamp
	// DropSkipped: an aggregation, join or flat-map skipped a tombstone.
	DropSkipped
	// DropUndecodable: a source with SkipUndecodable could not decode it.
	DropUndecodable
	// DropNullKey: an operator that needs a key (an aggregation, a table,
	// an inner join, a repartition feeding no left or outer join) got a
	// record with a null key.
	DropNullKey
	// DropDuplicate: Deduplicate had seen the record's id within its
	// window.
	DropDuplicate
)

func (r DropReason) String() string {
	switch r {
	case DropLate:
		return "late"
	case DropInvalidTimestamp:
		return "invalid-timestamp"
	case DropSkipped:
		return "skipped"
	case DropUndecodable:
		return "undecodable"
	case DropNullKey:
		return "null-key"
	case DropDuplicate:
		return "duplicate"
	}
	return "unknown"
}

// TaskID names a task: one sub-topology instance for one input partition.
type TaskID struct {
	SubTopology int
	Partition   int32
}

func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.SubTopology, id.Partition) }

// TaskEnv is what an instantiated sub-topology needs from the task that runs
// it: the seam between this package and the task core. Package task
// implements it (with WindowCloser and ClockKeeper) on an unexported view of
// its Task, so these callbacks are for operators, not for a task's runtime;
// nothing here reads a clock or does I/O, so tasks stay deterministic.
type TaskEnv interface {
	TaskID() TaskID
	// Store returns the task's open instance of the named store.
	Store(name string) (store.Store, error)
	// Schedule registers a punctuator (see PunctuationType).
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error)
	// ObserveTimestamp is called by a source node with the event time of the
	// record it is about to forward, before any processor sees it, so stream
	// time includes the record being processed.
	ObserveTimestamp(ts int64)
	// StreamTime is the task's stream time: the largest event time it has
	// processed, or -1 before the first record.
	StreamTime() int64
	// WallClock is the runtime's current time in ms.
	WallClock() int64
	// Meta locates the input record being processed; ok is false during
	// punctuation.
	Meta() (meta RecordMeta, ok bool)
	// Emit sends a record to a sink topic. rec is only valid during the call.
	Emit(rec *OutputRecord) error
	// PartitionCount is the partition count of topic, needed by user
	// partitioners.
	PartitionCount(topic string) (int32, error)
	// Dropped counts a record that node dropped.
	Dropped(node string, reason DropReason)
}

// WindowCloser is an optional extension of TaskEnv: an environment that
// implements it learns how many final results of closed windows and
// sessions an emit-final operator just forwarded. The live runtime's
// frontier controller commits early on them (a watermark-aligned barrier),
// so a final result does not wait for the next commit interval.
type WindowCloser interface {
	WindowsClosed(n int)
}

func windowsClosed(env TaskEnv, n int) {
	if wc, ok := env.(WindowCloser); ok && n > 0 {
		wc.WindowsClosed(n)
	}
}

// ClockKeeper is an optional extension of TaskEnv: an environment that
// keeps operator clocks across restarts. A windowed operator's stream time
// (the largest timestamp it has seen) decides what is late; an operator
// that restarted from -1 would accept a record its predecessor dropped.
// The operator registers a getter for its clock under its name and starts
// from what RestoredClock returns: the clock at the last commit, or -1.
type ClockKeeper interface {
	RestoredClock(name string) int64
	KeepClock(name string, clock func() int64)
}

// operatorClock registers clock with env and returns where it resumes.
func operatorClock(env *opEnv, name string, clock func() int64) int64 {
	ck, ok := env.TaskEnv.(ClockKeeper)
	if !ok {
		return -1
	}
	ck.KeepClock(name, clock)
	return ck.RestoredClock(name)
}

// opEnv is a node's view of its task.
type opEnv struct {
	TaskEnv
	node   string
	shared map[string]any
}

func (e *opEnv) store(name string) (store.Store, error) {
	s, err := e.TaskEnv.Store(name)
	if err != nil {
		return nil, fmt.Errorf("operator %q: store %q: %w", e.node, name, err)
	}
	return s, nil
}

func (e *opEnv) keyValue(name string) (store.KeyValue, error) {
	return storeAs[store.KeyValue](e, name, store.KindKeyValue)
}

func (e *opEnv) window(name string) (store.Window, error) {
	return storeAs[store.Window](e, name, store.KindWindow)
}

func (e *opEnv) session(name string) (store.Session, error) {
	return storeAs[store.Session](e, name, store.KindSession)
}

// storeAs opens store name as the contract S (of kind want), failing with
// both kinds named when the runtime opened a store of another kind.
func storeAs[S store.Store](e *opEnv, name string, want store.Kind) (S, error) {
	var zero S
	s, err := e.store(name)
	if err != nil {
		return zero, err
	}
	st, ok := s.(S)
	if !ok {
		return zero, fmt.Errorf("operator %q: store %q is a %s store, want %s", e.node, name, s.Kind(), want)
	}
	return st, nil
}

// sharedValue returns the per-task value under key, creating it with mk:
// the two sides of a join share their time tracker this way.
func (e *opEnv) sharedValue(key string, mk func() any) any {
	if v, ok := e.shared[key]; ok {
		return v
	}
	v := mk()
	e.shared[key] = v
	return v
}

// errorf is an operator's error: "operator <node>: <message>", which the
// runtime's error handlers read the operator's name from (OperatorName).
func errorf(node, format string, args ...any) error {
	return &operatorError{node: node, err: fmt.Errorf(format, args...)}
}

type operatorError struct {
	node string
	err  error
}

func (e *operatorError) Error() string { return fmt.Sprintf("operator %q: %v", e.node, e.err) }
func (e *operatorError) Unwrap() error { return e.err }

// OperatorName is the operator that failed: the innermost one named, as
// an operator wraps the errors of those it forwards to.
func (e *operatorError) OperatorName() string {
	var inner *operatorError
	if errors.As(e.err, &inner) {
		return inner.OperatorName()
	}
	return e.node
}
