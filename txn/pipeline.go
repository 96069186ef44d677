package txn

import (
	"context"
	"fmt"
	"time"
)

// Pipelined commits: the caller's record loop need not wait for EndTxn.
//
// Commit runs a whole commit on the caller's goroutine. For a caller that
// keeps processing while a transaction ends, the same protocol is split in
// three steps:
//
//   - Seal (caller's goroutine): prepares every participant, exactly as
//     Commit does, and captures the offsets the transaction commits
//     (Transactor.Pending, on the caller's goroutine, where the caller
//     knows what it processed). A participant that fails to prepare aborts
//     the transaction at once, as in Commit.
//   - Ending.End (any goroutine): flush, offset commit and EndTxn, and
//     resolving an unknown outcome. It touches neither the Machine nor
//     the participants, so the caller may go on meanwhile; what it may
//     do with the Transactor's client meanwhile is the client's business
//     (kgo: no poll, produce or Begin while End runs).
//   - Finish (caller's goroutine, after End): records the outcome in the
//     Machine and applies or discards every participant sealed with the
//     transaction, as Commit does.
//
// While an Ending is in flight the Machine stays in PhaseEnding: Begin,
// Commit and Abort fail with ErrPhase until Finish.

// Ending is a sealed transaction whose End may run off the caller's
// goroutine. Its fields belong to End until it returns.
type Ending struct {
	c       *Committer
	parts   []Participant
	md      Metadata
	pending Offsets
	started time.Time
	prepare time.Duration
	r       ended
	ran     bool
}

// Seal prepares the open transaction's participants for a pipelined
// commit. On a participant's failure the transaction is aborted here and
// the error is a *PrepareError (Stats describe the abort), as from
// Commit; the Ending is nil then.
func (c *Committer) Seal(ctx context.Context) (*Ending, Stats, error) {
	p, err := c.prepareAll(ctx)
	if err != nil {
		return nil, Stats{}, err
	}
	if p.err != nil {
		st, err := p.abort(ctx)
		return nil, st, err
	}
	return &Ending{c: c, parts: p.parts, md: p.md, pending: c.sess.Pending(), started: p.started, prepare: p.took}, Stats{}, nil
}

// End ends the sealed transaction with a commit: flush, offset commit
// with the participants' metadata, EndTxn, and after an End error reading
// the committed offsets to learn the outcome. Call it once, from any
// goroutine; then Finish on the Committer's.
func (e *Ending) End(ctx context.Context) {
	e.r = e.c.end(ctx, ActEnd, e.pending, e.md)
	e.ran = true
}

// Offsets are the input offsets the sealed transaction commits.
func (e *Ending) Offsets() Offsets { return e.pending }

// Finish settles a transaction whose End has returned: Apply of every
// participant sealed with it (in order) once it committed, Discard of each
// after an abort. Its results are Commit's.
func (c *Committer) Finish(ctx context.Context, e *Ending) (Stats, error) {
	if !e.ran {
		return Stats{}, fmt.Errorf("%w: finish before End returned", ErrPhase)
	}
	st, err := c.settle(ctx, e.r, e.parts)
	st.Started, st.Prepare = e.started, e.prepare
	return st, err
}
