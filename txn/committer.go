package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// Offsets are input offsets by topic and partition: the next offset to
// consume, as committed to the group.
type Offsets map[string]map[int32]int64

// Metadata is offset commit metadata by input topic and partition: what a
// participant wants stored next to the input offsets the transaction
// commits (a task's clocks and changelog positions), read back by the
// next owner of the partition.
type Metadata map[string]map[int32]string

// Set records md for topic/partition.
func (m Metadata) Set(topic string, partition int32, md string) {
	if m[topic] == nil {
		m[topic] = map[int32]string{}
	}
	m[topic][partition] = md
}

// Transactor is the transactional client the Committer drives. NewGroupTransactor
// adapts kgo.GroupTransactSession; tests substitute fakes.
type Transactor interface {
	Begin() error
	// End flushes, commits the consumed offsets inside the transaction,
	// each with its entry of md, and ends it. committed=false with a nil
	// error is a clean abort.
	End(ctx context.Context, commit bool, md Metadata) (committed bool, err error)
	// Pending returns the offsets the next End would commit.
	Pending() Offsets
	// Committed reads the group's committed offsets for the given
	// partitions, waiting for pending transactional commits to settle
	// (RequireStable).
	Committed(ctx context.Context, of Offsets) (Offsets, error)
}

// Participant is one share of a transaction: a task's state overlay and
// changelog records, or the outputs (sink and frontier records).
type Participant interface {
	// Prepare makes the participant's records of the transaction
	// acknowledged by the broker and returns the offset metadata it wants
	// committed (nil for none). Participants prepare concurrently.
	Prepare(ctx context.Context) (Metadata, error)
	// Apply makes what was prepared part of local state. Called only after
	// the transaction committed, in the order the participants are listed.
	Apply(ctx context.Context) error
	// Discard drops it after an abort.
	Discard()
}

// PrepareError is Commit's error when a participant could not prepare: the
// transaction was aborted (AbortErr is the abort's own error, if any) and
// every participant discarded.
type PrepareError struct {
	Err      error
	AbortErr error
}

func (e *PrepareError) Error() string {
	if e.AbortErr != nil {
		return fmt.Sprintf("txn: prepare: %v (abort: %v)", e.Err, e.AbortErr)
	}
	return "txn: prepare: " + e.Err.Error()
}

func (e *PrepareError) Unwrap() error { return e.Err }

// Point names a step of the commit, for fault injection.
type Point int

const (
	BeforeEnd   Point = iota // participants prepared, EndTxn not yet sent
	AfterCommit              // EndTxn committed, overlays not yet applied
	AfterApply               // overlays applied, frontier not yet acknowledged
	BeforeFlush              // a commit starts, no participant prepared yet
)

// Stats describe one finished commit attempt; the frontier controller learns
// commit cost and latency from them.
type Stats struct {
	Committed bool
	// Offsets the transaction committed (empty when it aborted).
	Offsets Offsets
	Started time.Time
	// Prepare is the participants' flush (changelog, sink and frontier
	// records, side by side).
	Prepare time.Duration
	// End is flush + offset commit + EndTxn.
	End time.Duration
	// Resolve is the time spent learning an unknown outcome.
	Resolve time.Duration
	Apply   time.Duration
}

// Committer runs the commit protocol over a Transactor. It is used from one
// goroutine: the process's commit loop.
type Committer struct {
	sess         Transactor
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
func NewCommitter(sess Transactor, participants func() []Participant, opts ...CommitterOption) *Committer {
	c := &Committer{sess: sess, participants: participants, now: time.Now, fault: func(Point) {}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Phase is the commit cycle's phase.
func (c *Committer) Phase() Phase { return c.m.Phase() }

// Open reports whether a transaction is open (begun and not yet ending).
func (c *Committer) Open() bool { return c.m.Phase() == PhaseOpen }

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

// Commit prepares every participant, ends the open transaction with a
// commit carrying their offset metadata and, once Kafka has it, applies
// every participant. It returns ErrFenced or ErrOutcomeUnknown (wrapped)
// when the caller must restart its tasks with a new session, a
// *PrepareError when a participant could not prepare (the transaction was
// aborted); after any other error the transaction was aborted and inputs
// must be rewound.
func (c *Committer) Commit(ctx context.Context) (Stats, error) {
	p, err := c.prepareAll(ctx)
	if err != nil {
		return Stats{}, err
	}
	if p.err != nil {
		return p.abort(ctx)
	}
	st, err := c.finish(ctx, p.act, p.parts, p.md)
	st.Started, st.Prepare = p.started, p.took
	return st, err
}

// prepared is a transaction whose participants have prepared, or failed
// to (err), and what the state machine says to do next (act).
type prepared struct {
	c       *Committer
	parts   []Participant
	md      Metadata
	err     error
	act     Action
	started time.Time
	took    time.Duration
}

// prepareAll moves the state machine to committing and prepares every
// participant of the open transaction.
func (c *Committer) prepareAll(ctx context.Context) (prepared, error) {
	if _, err := c.m.Commit(); err != nil {
		return prepared{}, err
	}
	p := prepared{c: c, started: c.now()}
	c.fault(BeforeFlush)
	p.parts = c.participants()
	p.md, p.err = prepare(ctx, p.parts)
	p.took = c.now().Sub(p.started)
	act, err := c.m.Prepared(p.err)
	if err != nil {
		return prepared{}, err
	}
	p.act = act
	return p, nil
}

// abort ends a transaction whose prepare failed (the state machine says
// abort) and returns the *PrepareError.
func (p prepared) abort(ctx context.Context) (Stats, error) {
	st, err := p.c.finish(ctx, p.act, p.parts, nil)
	st.Started, st.Prepare = p.started, p.took
	return st, &PrepareError{Err: p.err, AbortErr: err}
}

// prepare runs every participant's Prepare side by side (each waits for
// its own acks, so a commit pays one round trip, not one per task) and
// merges their metadata.
func prepare(ctx context.Context, parts []Participant) (Metadata, error) {
	g, gctx := errgroup.WithContext(ctx)
	mds := make([]Metadata, len(parts))
	for i, p := range parts {
		g.Go(func() error {
			md, err := p.Prepare(gctx)
			mds[i] = md
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := Metadata{}
	for _, md := range mds {
		for topic, ps := range md {
			for p, v := range ps {
				out.Set(topic, p, v)
			}
		}
	}
	return out, nil
}

// Abort aborts the open transaction and discards every participant.
func (c *Committer) Abort(ctx context.Context) (Stats, error) {
	act, err := c.m.Abort()
	if err != nil {
		return Stats{}, err
	}
	st, err := c.finish(ctx, act, c.participants(), nil)
	return st, err
}

func (c *Committer) finish(ctx context.Context, act Action, parts []Participant, md Metadata) (Stats, error) {
	r := c.end(ctx, act, c.sess.Pending(), md)
	return c.settle(ctx, r, parts)
}

// ended is what End (and, after an End error, resolving its outcome) found:
// everything settle needs to move the Machine on, gathered without it.
type ended struct {
	act       Action // ActEnd or ActAbort: what End was asked to do
	pending   Offsets
	committed bool
	endErr    error
	// resolved: End failed and the committed offsets were read;
	// rCommitted/rKnown are what they said.
	resolved, rCommitted, rKnown bool
	started                      time.Time
	end, resolve                 time.Duration
}

// end ends the transaction (commit when act is ActEnd, else abort) and,
// after an End error on a commit, reads the committed offsets to learn
// its outcome. It touches neither the Machine nor the participants, so it
// may run on a goroutine of its own (Ending.End).
func (c *Committer) end(ctx context.Context, act Action, pending Offsets, md Metadata) ended {
	r := ended{act: act, pending: pending, started: c.now()}
	c.fault(BeforeEnd)
	ends := c.now()
	r.committed, r.endErr = c.sess.End(ctx, act == ActEnd, md)
	r.end = c.now().Sub(ends)
	switch {
	case r.endErr == nil || errors.Is(r.endErr, ErrFenced):
	case act == ActAbort:
		// An abort cannot have committed, whatever its error: the
		// transaction aborted, or stays open for the next producer
		// to fence.
		r.resolved, r.rKnown = true, true
	default:
		rs := c.now()
		r.resolved = true
		r.rCommitted, r.rKnown = c.resolve(ctx, pending)
		r.resolve = c.now().Sub(rs)
	}
	return r
}

// settle records what end found in the Machine and applies or discards
// every participant.
func (c *Committer) settle(ctx context.Context, r ended, parts []Participant) (Stats, error) {
	st := Stats{Started: r.started, End: r.end, Resolve: r.resolve}
	endErr := r.endErr
	act, err := c.m.Ended(r.committed, endErr)
	if err != nil {
		return st, err
	}
	if act == ActResolve {
		if !r.resolved {
			return st, fmt.Errorf("txn: End failed with %v and its outcome was not resolved", endErr)
		}
		if act, err = c.m.Resolved(r.rCommitted, r.rKnown); err != nil {
			return st, err
		}
	}
	switch act {
	case ActApply:
		c.fault(AfterCommit)
		st.Committed, st.Offsets = true, r.pending
		as := c.now()
		for _, p := range parts {
			if err := p.Apply(ctx); err != nil {
				// Kafka has the commit; local state lags it. A restart
				// restores the tail from the changelog.
				c.m.Reset()
				return st, fmt.Errorf("%w: apply after commit: %w", ErrOutcomeUnknown, err)
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
		for _, p := range parts {
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
	backoff := retry.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for {
		got, err := c.sess.Committed(ctx, pending)
		wait := 50 * time.Millisecond
		switch {
		case err == nil:
			return outcome(pending, got)
		case errors.Is(err, kerr.UnstableOffsetCommit):
			// The transaction's markers are still being written:
			// its outcome is about to be known.
		case retry.Transient(err):
			// The group coordinator loading or moving, a request
			// timing out: an outcome given up for unknown costs a
			// session restart reported as a lost commit.
			wait = backoff.Next()
		default:
			return false, false
		}
		if retry.Sleep(ctx, wait) != nil {
			return false, false
		}
	}
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
