package task

import (
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

// runDue fires the punctuators of typ that are due at now, in the order they
// were scheduled. Punctuators scheduled while others run wait for the next
// call; cancelled ones are dropped.
func (t *Task) runDue(typ topology.PunctuationType, now int64) error {
	if now < 0 {
		return nil
	}
	var firstErr error
	n := len(t.schedules)
	for i := 0; i < n && firstErr == nil; i++ {
		s := t.schedules[i]
		if s.cancelled || s.typ != typ || now < s.next {
			continue
		}
		s.advance(now)
		t.metrics.Punctuations++
		t.punctuating = true
		err := s.fn(now)
		t.punctuating = false
		if err != nil {
			firstErr = errorf(t, "%s punctuation at %d: %w", typ, now, err)
		}
	}
	kept := t.schedules[:0]
	for _, s := range t.schedules {
		if !s.cancelled {
			kept = append(kept, s)
		}
	}
	clear(t.schedules[len(kept):])
	t.schedules = kept
	return firstErr
}
