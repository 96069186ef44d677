package changelog

import (
	"context"
)

// Participant adapts a TaskState to a commit loop that drives participants
// without passing offsets around (txn.Participant's shape): Prepare before
// the transaction ends, then Apply after it committed or Discard after it
// aborted. It remembers the offsets Prepare's Flush returned.
type Participant struct {
	t    *TaskState
	offs ChangelogOffsets
}

// Participant returns the task's commit-loop adapter.
func (t *TaskState) Participant() *Participant { return &Participant{t: t} }

// Prepare produces the overlay's changelog records into the open
// transaction (TaskState.Flush). Call it for every task before ending the
// transaction.
func (p *Participant) Prepare(ctx context.Context) error {
	offs, err := p.t.Flush(ctx)
	if err != nil {
		return err
	}
	p.offs = offs
	return nil
}

// Apply writes the overlay with the offsets of the last Prepare.
func (p *Participant) Apply(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := p.t.Apply(p.offs)
	if err == nil {
		p.offs = nil
	}
	return err
}

// Discard drops the overlay: the transaction aborted.
func (p *Participant) Discard() {
	p.offs = nil
	p.t.Discard()
}
