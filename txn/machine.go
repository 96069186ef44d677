package txn

import (
	"errors"
	"fmt"
)

// Phase is where a commit cycle stands.
type Phase int

const (
	// PhaseIdle: no transaction is open.
	PhaseIdle Phase = iota
	// PhaseOpen: a transaction is open and records may be produced.
	PhaseOpen
	// PhasePreparing: every participant flushes its records and names the
	// offset metadata it wants committed.
	PhasePreparing
	// PhaseEnding: flush, offset commit and EndTxn are under way.
	PhaseEnding
	// PhaseResolving: End failed and whether it committed is unknown.
	PhaseResolving
	// PhaseApplying: the transaction committed; overlays are being applied.
	PhaseApplying
	// PhaseFailed: the session cannot go on (fenced or unresolvable); the
	// process must close its tasks and rejoin with a new session.
	PhaseFailed
)

func (p Phase) String() string {
	return [...]string{"idle", "open", "preparing", "ending", "resolving", "applying", "failed"}[p]
}

// Action is what the Machine asks its driver to do next.
type Action int

const (
	ActNone Action = iota
	// ActPrepare: every participant flushes its records into the
	// transaction and returns its offset metadata.
	ActPrepare
	// ActEnd: flush, commit offsets in the transaction, EndTxn(commit).
	ActEnd
	// ActAbort: EndTxn(abort).
	ActAbort
	// ActResolve: read committed offsets (RequireStable) to learn whether
	// the failed End committed.
	ActResolve
	// ActApply: apply every participant's overlay with its offsets.
	ActApply
	// ActDiscard: discard every overlay and rewind inputs to the committed
	// offsets.
	ActDiscard
	// ActAck: the commit is durable and applied; advance the frontier.
	ActAck
	// ActRestart: close tasks, drop the session, rejoin with a new one.
	ActRestart
)

func (a Action) String() string {
	return [...]string{"none", "prepare", "end", "abort", "resolve", "apply", "discard", "ack", "restart"}[a]
}

// ErrFenced is wrapped by errors that mean another producer with this
// transactional id, or a newer group generation, owns the work now.
var ErrFenced = errors.New("txn: fenced")

// ErrOutcomeUnknown is returned when a failed End cannot be resolved. Local
// state was neither applied nor discarded; the caller must restart its tasks,
// which restore from the changelogs (local state is never ahead of Kafka).
var ErrOutcomeUnknown = errors.New("txn: commit outcome unknown")

// ErrPhase is returned for an event the current phase does not accept: a
// bug in the driver, never a Kafka condition.
var ErrPhase = errors.New("txn: event not valid in this phase")

// Machine is one process's commit cycle as a deterministic state machine.
// Each method records an outcome and returns the next action.
type Machine struct {
	phase   Phase
	commits uint64
	aborts  uint64
}

// Phase is the current phase.
func (m *Machine) Phase() Phase { return m.phase }

// Counts returns committed and aborted transactions so far.
func (m *Machine) Counts() (commits, aborts uint64) { return m.commits, m.aborts }

func (m *Machine) want(event string, phases ...Phase) error {
	for _, p := range phases {
		if m.phase == p {
			return nil
		}
	}
	return fmt.Errorf("%w: %s in phase %s", ErrPhase, event, m.phase)
}

// Begin opens a transaction.
func (m *Machine) Begin() error {
	if err := m.want("begin", PhaseIdle); err != nil {
		return err
	}
	m.phase = PhaseOpen
	return nil
}

// Commit asks to end the open transaction with a commit: its participants
// prepare first.
func (m *Machine) Commit() (Action, error) {
	if err := m.want("commit", PhaseOpen); err != nil {
		return ActNone, err
	}
	m.phase = PhasePreparing
	return ActPrepare, nil
}

// Prepared records whether every participant prepared. A failed prepare
// (a changelog or output the broker did not take) aborts the transaction.
func (m *Machine) Prepared(err error) (Action, error) {
	if err := m.want("prepared", PhasePreparing); err != nil {
		return ActNone, err
	}
	m.phase = PhaseEnding
	if err != nil {
		return ActAbort, nil
	}
	return ActEnd, nil
}

// Abort asks to abort the open transaction (a processing error, revoked
// partitions, shutdown without commit).
func (m *Machine) Abort() (Action, error) {
	if err := m.want("abort", PhaseOpen); err != nil {
		return ActNone, err
	}
	m.phase = PhaseEnding
	return ActAbort, nil
}

// Ended records what End returned. committed=false with a nil error is a
// clean abort (the session aborted, e.g. for a rebalance).
func (m *Machine) Ended(committed bool, err error) (Action, error) {
	if err := m.want("ended", PhaseEnding); err != nil {
		return ActNone, err
	}
	switch {
	case err == nil && committed:
		m.phase = PhaseApplying
		return ActApply, nil
	case err == nil:
		m.phase = PhaseIdle
		m.aborts++
		return ActDiscard, nil
	case errors.Is(err, ErrFenced):
		// A zombie: whatever this session did is not ours to apply.
		m.phase = PhaseFailed
		m.aborts++
		return ActRestart, nil
	default:
		m.phase = PhaseResolving
		return ActResolve, nil
	}
}

// Resolved records the outcome learnt from the committed offsets. known is
// false when the offsets cannot tell (the transaction carried no offsets, or
// they could not be read).
func (m *Machine) Resolved(committed, known bool) (Action, error) {
	if err := m.want("resolved", PhaseResolving); err != nil {
		return ActNone, err
	}
	switch {
	case !known:
		m.phase = PhaseFailed
		return ActRestart, nil
	case committed:
		m.phase = PhaseApplying
		return ActApply, nil
	default:
		m.phase = PhaseFailed // End errors leave the session unusable
		m.aborts++
		return ActDiscard, nil
	}
}

// Applied records that every overlay was applied.
func (m *Machine) Applied() (Action, error) {
	if err := m.want("applied", PhaseApplying); err != nil {
		return ActNone, err
	}
	m.phase = PhaseIdle
	m.commits++
	return ActAck, nil
}

// Reset starts over after a restart with a new session.
func (m *Machine) Reset() { m.phase = PhaseIdle }
