package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTransientTellsPassingFailuresFromPermanentOnes(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a pending transactional offset commit", fmt.Errorf("committed offset in/2: %w", kerr.UnstableOffsetCommit), true},
		{"a leader election", fmt.Errorf("list offsets: %w", kerr.LeaderNotAvailable), true},
		{"a broker that is restarting refuses connections", fmt.Errorf("init producer: %w", refused), true},
		{"a request that timed out", fmt.Errorf("fetch: %w", context.DeadlineExceeded), true},
		{"a coordinator still loading", kerr.CoordinatorLoadInProgress, true},
		{"shutdown is not a failure to retry", fmt.Errorf("poll: %w", context.Canceled), false},
		{"a record too large never fits", fmt.Errorf("produce: %w", kerr.MessageTooLarge), false},
		{"an authorization failure", kerr.TopicAuthorizationFailed, false},
		{"a plain error", errors.New("bad config"), false},
		{"no error", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Transient(tt.err); got != tt.want {
				t.Fatalf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 80, 80, 80}
	for i, w := range want {
		w *= time.Millisecond
		if d := b.Next(); d < w/2 || d > w {
			t.Fatalf("wait %d = %s, want in [%s, %s]", i, d, w/2, w)
		}
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond {
		t.Fatalf("after Reset the wait is %s, want ≤ 10ms", d)
	}
}

func TestDoRetriesTransientErrorsOnly(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := Do(ctx, nil, "op", func(context.Context) error {
		calls++
		if calls < 3 {
			return kerr.LeaderNotAvailable
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Do = %v after %d calls, want success after 3", err, calls)
	}
	calls = 0
	err = Do(ctx, nil, "op", func(context.Context) error { calls++; return kerr.MessageTooLarge })
	if !errors.Is(err, kerr.MessageTooLarge) || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want the permanent error after 1", err, calls)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = Do(cctx, nil, "op", func(context.Context) error { return kerr.LeaderNotAvailable })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do after ctx ended = %v, want it to wrap the deadline", err)
	}
}
