package processor

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/txn"
)

// errTxnTimedOut is wrapped by the error of a session whose transaction
// the broker aborted because it stayed open past TransactionTimeout.
var errTxnTimedOut = errors.New("transaction timed out")

// timedOut names the cause of a fenced error when the transaction was open
// longer than TransactionTimeout: the broker aborted it and bumped the
// producer epoch, which the client reports as INVALID_PRODUCER_EPOCH or
// PRODUCER_FENCED ("a newer producer"), though no other instance took
// over. The record loop stalled (a slow user function, a long pause).
func (s *session) timedOut(err error) error {
	if !errors.Is(err, txn.ErrFenced) {
		return err
	}
	open, past := s.openPastTimeout()
	if !past {
		return err
	}
	return fmt.Errorf("%w: the transaction was open %s, past TransactionTimeout %s: the broker aborted it (the record loop stalled); then: %v",
		errTxnTimedOut, open.Round(time.Millisecond), s.app.cfg.TransactionTimeout, err)
}

// openPastTimeout says how long the latest transaction has been open and
// whether that is past TransactionTimeout, when the broker aborts it.
func (s *session) openPastTimeout() (time.Duration, bool) {
	if s.began.IsZero() {
		return 0, false
	}
	open := s.now().Sub(s.began)
	return open, open > s.app.cfg.TransactionTimeout
}
