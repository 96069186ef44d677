package txn

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Offsets are input offsets by topic and partition: the next offset to
// consume, as committed to the group.
type Offsets map[string]map[int32]int64

// Session is the transactional client the Committer drives. NewKafkaSession
// adapts kgo.GroupTransactSession; tests substitute fakes.
type Session interface {
	Begin() error
	// End flushes, commits the consumed offsets inside the transaction and
	// ends it. committed=false with a nil error is a clean abort.
	End(ctx context.Context, commit bool) (committed bool, err error)
	// Pending returns the offsets the next End would commit.
	Pending() Offsets
	// Committed reads the group's committed offsets for the given
	// partitions, waiting for pending transactional commits to settle
	// (RequireStable).
	Committed(ctx context.Context, of Offsets) (Offsets, error)
}

// Participant is one task's share of a transaction: its state overlay.
type Participant interface {
	// Apply makes the overlay part of local state, with the changelog
	// offsets it reflects. Called only after the transaction committed.
	Apply(ctx context.Context) error
	// Discard drops the overlay after an abort.
	Discard()
}

// Point names a step of the commit, for fault injection.
type Point int

const (
	BeforeEnd   Point = iota // records flushed or not, EndTxn not yet sent
	AfterCommit              // EndTxn committed, overlays not yet applied
	AfterApply               // overlays applied, frontier not yet acknowledged
	// BeforeFlush: a commit starts, nothing of it flushed yet. The
	// runtime's flush (changelog and output records) precedes the
	// Committer's steps, so the runtime calls the hook here itself.
	BeforeFlush
)

// Stats describe one finished commit attempt; the frontier controller learns
// commit cost and latency from them.
type Stats struct {
	Committed bool
	// Offsets the transaction committed (empty when it aborted).
	Offsets Offsets
	Started time.Time
	// End is flush + offset commit + EndTxn: the commit latency L.
	End time.Duration
	// Resolve is the time spent learning an unknown outcome.
	Resolve time.Duration
	Apply   time.Duration
}

// Committer runs the commit protocol over a Session. It is used from one
// goroutine: the process's commit loop.
type Committer struct {
	sess         Session
	participants func() []Participant
	now          func() time.Time
	fault        func(Point)
	m            Machine
}

// CommitterOption configures a Committer.
type CommitterOption func(*Committer)

// WithClock replaces time.Now, for deterministic tests and simulation.
func WithClock(now func() time.Time) CommitterOption {
	return func(c *Committer) { c.now = now }
}

// WithFaultHook calls fn at each Point; crash tests kill the process there.
func WithFaultHook(fn func(Point)) CommitterOption {
	return func(c *Committer) { c.fault = fn }
}

// NewCommitter returns a Committer. participants is called at each commit
// and abort to list the overlays of the tasks the transaction covers.
func NewCommitter(sess Session, participants func() []Participant, opts ...CommitterOption) *Committer {
	c := &Committer{sess: sess, participants: participants, now: time.Now, fault: func(Point) {}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Phase is the commit cycle's phase.
func (c *Committer) Phase() Phase { return c.m.Phase() }

// Begin opens a transaction.
func (c *Committer) Begin() error {
	if err := c.m.Begin(); err != nil {
		return err
	}
	if err := c.sess.Begin(); err != nil {
		c.m.Reset()
		return fmt.Errorf("txn: begin: %w", err)
	}
	return nil
}

// Commit ends the open transaction with a commit and, once Kafka has it,
// applies every participant. It returns ErrFenced or ErrOutcomeUnknown
// (wrapped) when the caller must restart its tasks with a new session; after
// any other error the transaction was aborted and inputs must be rewound.
func (c *Committer) Commit(ctx context.Context) (Stats, error) {
	act, err := c.m.Commit()
	if err != nil {
		return Stats{}, err
	}
	return c.finish(ctx, act)
}

// Abort aborts the open transaction and discards every overlay.
func (c *Committer) Abort(ctx context.Context) (Stats, error) {
	act, err := c.m.Abort()
	if err != nil {
		return Stats{}, err
	}
	return c.finish(ctx, act)
}

func (c *Committer) finish(ctx context.Context, act Action) (Stats, error) {
	st := Stats{Started: c.now()}
	pending := c.sess.Pending()
	c.fault(BeforeEnd)
	committed, endErr := c.sess.End(ctx, act == ActEnd)
	st.End = c.now().Sub(st.Started)
	act, err := c.m.Ended(committed, endErr)
	if err != nil {
		return st, err
	}
	if act == ActResolve {
		rs := c.now()
		committed, known := c.resolve(ctx, pending)
		st.Resolve = c.now().Sub(rs)
		if act, err = c.m.Resolved(committed, known); err != nil {
			return st, err
		}
	}
	switch act {
	case ActApply:
		c.fault(AfterCommit)
		st.Committed, st.Offsets = true, pending
		as := c.now()
		for _, p := range c.participants() {
			if err := p.Apply(ctx); err != nil {
				// Kafka has the commit; local state lags it. A restart
				// restores the tail from the changelog.
				c.m.Reset()
				return st, fmt.Errorf("%w: apply after commit: %v", ErrOutcomeUnknown, err)
			}
		}
		st.Apply = c.now().Sub(as)
		if _, err := c.m.Applied(); err != nil {
			return st, err
		}
		c.fault(AfterApply)
		if endErr != nil {
			// Committed, but the session is unusable after an End error.
			return st, fmt.Errorf("txn: commit resolved as committed, session needs restart: %w", endErr)
		}
		return st, nil
	case ActDiscard:
		for _, p := range c.participants() {
			p.Discard()
		}
		if endErr != nil {
			return st, fmt.Errorf("txn: transaction aborted: %w", endErr)
		}
		return st, nil
	case ActRestart:
		if errors.Is(endErr, ErrFenced) {
			return st, endErr
		}
		return st, fmt.Errorf("%w: %v", ErrOutcomeUnknown, endErr)
	}
	return st, fmt.Errorf("txn: unexpected action %s", act)
}

// resolve learns whether a failed End committed by comparing the group's
// stable committed offsets with the ones the transaction carried.
func (c *Committer) resolve(ctx context.Context, pending Offsets) (committed, known bool) {
	if len(pending) == 0 {
		return false, false
	}
	got, err := c.sess.Committed(ctx, pending)
	if err != nil {
		return false, false
	}
	return outcome(pending, got)
}

// outcome is committed when every partition's committed offset is the
// pending one, aborted when every one is behind it, unknown otherwise.
func outcome(pending, committed Offsets) (wasCommitted, known bool) {
	var at, behind int
	for topic, ps := range pending {
		for p, want := range ps {
			have, ok := committed[topic][p]
			switch {
			case ok && have == want:
				at++
			case !ok || have < want:
				behind++
			default:
				return false, false // ahead: someone else committed since
			}
		}
	}
	switch {
	case behind == 0 && at > 0:
		return true, true
	case at == 0 && behind > 0:
		return false, true
	}
	return false, false
}
