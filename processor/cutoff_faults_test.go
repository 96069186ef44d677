package processor_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/txn"
)

// TestCutOffPastBothTimeoutsIsRiddenThrough cuts the App off from a live
// broker (every connection closed on its first request) while a
// transaction is open, for longer than both SessionTimeout and
// TransactionTimeout: unlike a broker that is down, this broker's timers
// run, so the group drops the member and the coordinator aborts the
// transaction. When the network heals the App must resume by itself,
// without Run returning, and commit every count exactly once.
func TestCutOffPastBothTimeoutsIsRiddenThrough(t *testing.T) {
	t.Parallel()
	var armed, cut atomic.Bool
	hit := make(chan struct{}, 1)
	r := newFaultCluster(t, 2, buildCount)
	r.app, r.done, _ = r.start(shortCommits,
		func(c *processor.Config) { c.TransactionTimeout, c.SessionTimeout = 6*time.Second, 6*time.Second },
		processor.WithFaultHook(func(p txn.Point) {
			if p == txn.BeforeEnd && armed.CompareAndSwap(true, false) {
				cut.Store(true)
				hit <- struct{}{}
			}
		}))
	r.c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		r.c.KeepControl()
		if cut.Load() {
			return nil, errors.New("cut off"), true
		}
		return nil, nil, false
	})
	r.warmUp()
	armed.Store(true)
	r.feed(40)
	select {
	case <-hit:
	case <-time.After(20 * time.Second):
		t.Fatalf("no commit reached EndTxn\nlogs:\n%s", r.logs.String())
	}
	time.Sleep(10 * time.Second)
	select {
	case err := <-r.done:
		t.Fatalf("app stopped while cut off: %v\nlogs:\n%s", err, r.logs.String())
	default:
	}
	cut.Store(false)
	r.feed(40)
	r.check(60 * time.Second)
	if n := r.metric("tidemark_session_restarts_total"); n == 0 {
		t.Errorf("tidemark_session_restarts_total is 0 after a 10s cut-off: the outage is not visible")
	}
	t.Logf("session restarts: transient %v, fenced %v, transaction_timeout %v, outcome_unknown %v",
		r.metric("tidemark_session_restarts_total", `cause="transient"`), r.metric("tidemark_session_restarts_total", `cause="fenced"`),
		r.metric("tidemark_session_restarts_total", `cause="transaction_timeout"`), r.metric("tidemark_session_restarts_total", `cause="outcome_unknown"`))
}
