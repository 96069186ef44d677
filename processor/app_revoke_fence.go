package processor

import "context"

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
