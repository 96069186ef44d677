package task

import (
	"cmp"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/topology"
)

// schedule is one registered punctuator. Firing follows Kafka Streams: a
// punctuator due at t fires once when time reaches t, even if several
// intervals passed, and its next due time stays on its original grid.
// Stream-time punctuators start at 0, so the first record fires them;
// wall-clock punctuators first fire one interval after they were scheduled.
type schedule struct {
	interval  int64
	typ       topology.PunctuationType
	next      int64
	fn        topology.Punctuator
	cancelled bool
}

func (s *schedule) Cancel() { s.cancelled = true }

func (s *schedule) advance(now int64) {
	next := s.next + s.interval
	if next <= now {
		next = s.next + ((now-s.next)/s.interval+1)*s.interval
	}
	s.next = next
}

// Schedule implements topology.TaskEnv.
func (e *env) Schedule(interval time.Duration, typ topology.PunctuationType, fn topology.Punctuator) (topology.Cancellable, error) {
	if interval < time.Millisecond {
		return nil, errorf(e.task(), "schedule: interval %v below 1ms", interval)
	}
	s := &schedule{interval: interval.Milliseconds(), typ: typ, fn: fn}
	switch typ {
	case topology.StreamTime:
		s.next = 0
	case topology.WallClockTime:
		s.next = e.wall + s.interval
	default:
		return nil, errorf(e.task(), "schedule: unknown punctuation type %d", int(typ))
	}
	e.schedules = append(e.schedules, s)
	return s, nil
}

// PunctuationError is the error of one or more punctuators that returned an
// error or panicked. Process returns it after the record itself was
// processed in full: the record did not fail, a punctuator did, so the
// runtime asks its processing-error handler about the punctuation (Kafka
// Streams' KIP-1033 calls it with no record), not about the record. What the
// punctuators did before failing stands, and the other punctuators due at
// the same time still ran.
type PunctuationError struct {
	Task topology.TaskID
	Type topology.PunctuationType
	At   int64 // the time it fired at, ms
	Err  error // the punctuators' errors (errors.Join of several)
}

func (e *PunctuationError) Error() string {
	return fmt.Sprintf("task %s: %s punctuation at %d: %v", e.Task, e.Type, e.At, e.Err)
}

func (e *PunctuationError) Unwrap() error { return e.Err }

// runDue fires the punctuators of typ that are due at now, earliest due
// time first (those due at the same time in the order they were
// scheduled), as Kafka Streams' PunctuationQueue, a priority queue on the
// due time, fires them. Punctuators scheduled while others run wait for
// the next call; cancelled ones, even by a punctuator of the same call,
// are dropped. A punctuator that fails does not keep the others from
// running; their errors come back as a *PunctuationError.
func (t *Task) runDue(typ topology.PunctuationType, now int64) error {
	if now < 0 {
		return nil
	}
	due := t.due[:0]
	for _, s := range t.schedules {
		if !s.cancelled && s.typ == typ && now >= s.next {
			due = append(due, s)
		}
	}
	slices.SortStableFunc(due, func(a, b *schedule) int { return cmp.Compare(a.next, b.next) })
	var errs []error
	for _, s := range due {
		if s.cancelled {
			continue
		}
		s.advance(now)
		t.metrics.Punctuations++
		if err := t.fire(s, now); err != nil {
			errs = append(errs, err)
		}
	}
	clear(due)
	t.due = due[:0]
	kept := t.schedules[:0]
	for _, s := range t.schedules {
		if !s.cancelled {
			kept = append(kept, s)
		}
	}
	clear(t.schedules[len(kept):])
	t.schedules = kept
	if len(errs) == 0 {
		return nil
	}
	return &PunctuationError{Task: t.id, Type: typ, At: now, Err: errors.Join(errs...)}
}

// fire runs one punctuator; a panic becomes its error.
func (t *Task) fire(s *schedule, now int64) (err error) {
	t.punctuating = true
	defer func() {
		t.punctuating = false
		if p := recover(); p != nil {
			err = fmt.Errorf("punctuator panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return s.fn(now)
}
