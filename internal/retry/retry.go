// Package retry tells transient Kafka failures from permanent ones and
// retries the transient ones with capped exponential backoff. A service must
// ride through a broker restart or a leader election by itself; only errors
// that no retry can fix (a missing topic, an authorization failure, bad
// input) should stop it.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transient reports whether err may go away by itself: a Kafka error the
// protocol marks retriable (LEADER_NOT_AVAILABLE, UNSTABLE_OFFSET_COMMIT,
// COORDINATOR_LOAD_IN_PROGRESS, ...), a connection refused, reset or cut, or
// a request that timed out. The caller's own cancellation is not transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err) {
		return true
	}
	for _, e := range []error{kerr.ConcurrentTransactions, kerr.RequestTimedOut, kerr.NotCoordinator,
		kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.RebalanceInProgress} {
		if errors.Is(err, e) {
			return true
		}
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		return true // a broker closing connections while it stops
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded)
}

// Backoff is capped exponential backoff with jitter. The zero value starts
// at 100ms and caps at 5s.
type Backoff struct {
	Min, Max time.Duration
	n        int
}

// Next returns the next wait: Min doubled per call up to Max, each
// randomised in [d/2, d) so that instances restarting together spread out.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo << min(b.n, 20)
	if d <= 0 || d > hi {
		d = hi
	}
	b.n++
	return d/2 + rand.N(d/2+1)
}

// Reset starts the sequence over after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits d or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do runs fn until it succeeds or returns an error that is not Transient,
// waiting with backoff between attempts, or until ctx is done. Each retry
// is logged at warn level with what was attempted; the error returned
// after ctx ends wraps the last failure.
func Do(ctx context.Context, log *slog.Logger, what string, fn func(ctx context.Context) error) error {
	var b Backoff
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !Transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		}
		wait := b.Next()
		if log != nil {
			log.Warn("retrying after a transient Kafka error", "op", what, "attempt", attempt, "wait", wait.Round(time.Millisecond), "err", err)
		}
		if serr := Sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%s: %w (last error: %v)", what, serr, err)
		}
	}
}
