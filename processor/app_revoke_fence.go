package processor

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transaction must not commit when partitions were revoked after its
// first record was processed: the records of a revoked partition may be in
// it while the offsets it commits no longer cover that partition, and the
// partition's new owner would redo them (duplicate outputs). kgo's
// GroupTransactSession aborts such a transaction by itself, but it clears
// its revoked flag when End returns, and with pipelined commits the next
// transaction's records are processed while End runs: a revocation during
// End of N would be forgotten by the time N+1 ends. So the session fences
// on its own count of revocations: each transaction notes the count when
// its records began (the start of the previous commit, which is where a
// pipelined N+1 begins), and a commit that finds it moved aborts instead.

// revokedInTxn reports whether partitions were revoked since the open
// transaction's records began. Under at-least-once there is no
// transaction to abort.
func (s *session) revokedInTxn() bool {
	if s.gts == nil {
		return false
	}
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	return s.revokes != s.txnRevokes
}

// markTxnStart notes that records processed from now on belong to the next
// transaction.
func (s *session) markTxnStart() {
	s.assignMu.Lock()
	s.txnRevokes = s.revokes
	s.assignMu.Unlock()
}

// abortForRevoke aborts the open transaction because of a revocation: its
// records are redone from the committed offsets of the partitions still
// assigned.
func (s *session) abortForRevoke(ctx context.Context) error {
	s.markTxnStart()
	if err := s.begin(); err != nil {
		return err
	}
	return s.abort(ctx, abortRevoked)
}

// endRevoked ends the transaction a revocation found: the open one is
// aborted (commit sees the revocation). With none open, kgo's
// GroupTransactSession still remembers the revocation until its next End
// and, until then, swallows the revoke and lost callbacks of later
// rebalances (its wrapper returns early): an idle session would keep the
// tasks of partitions it no longer owns and later resume them from stale
// state. So End is called anyway; it rewinds the consumer to the committed
// offsets, which the tasks and queues follow.
func (s *session) endRevoked(ctx context.Context) error {
	if s.committer.Open() {
		return s.commit(ctx, "revoked")
	}
	if s.gts == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.app.cfg.TransactionTimeout)
	defer cancel()
	if _, err := s.gts.End(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("%w: end the session's transaction state after a revocation: %v", errRestartSession, err)
	}
	return s.resetTasks()
}
