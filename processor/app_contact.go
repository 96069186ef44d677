package processor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Out of contact: a query must not answer for partitions this instance
// may no longer own.
//
// An instance cut off from the broker (a network partition) or frozen (a
// long GC pause, a VM stall) keeps its state and goes on answering
// queries from it, but past the session timeout the group coordinator has
// given its partitions to others, which commit newer state; its answers
// are then true of the position they name and ever staler, with nothing
// to tell the caller. The record loop finds out only when its next
// heartbeat or commit fails, which in a partition can take the client's
// retries of tens of seconds. So each stream thread's group client stamps
// when it last heard from the coordinator (a heartbeat, join or sync
// response read), and while a join or sync waits for the rebalance the
// coordinator keeps the member, so that counts as contact too; a query
// for a partition of a thread that has not heard from it for longer than
// SessionTimeout answers ErrOutOfContact (HTTP 503) until it does again,
// and GET /readyz answers 503 meanwhile, so a load balancer sends the
// queries elsewhere; tidemark_out_of_contact_threads counts such threads.

// ErrOutOfContact is returned for a query of a partition whose stream
// thread has not heard from the group coordinator for longer than the
// session timeout: the group may have moved the partition to another
// instance, which answers for it. Retry, or ask another instance.
var ErrOutOfContact = errors.New("processor: this instance lost contact with its consumer group; the key's partition may have moved")

// groupContact is a thread's record of its contact with the coordinator.
type groupContact struct {
	heard   atomic.Int64 // unix nanoseconds of the last group response read
	joining atomic.Int64 // unix nanoseconds a join or sync was written and not answered; 0 none
}

var (
	_ kgo.HookBrokerWrite = (*groupContact)(nil)
	_ kgo.HookBrokerRead  = (*groupContact)(nil)
)

// groupKey reports whether a request key is the group membership's.
func groupKey(key int16) (membership, waits bool) {
	switch kmsg.Key(key) {
	case kmsg.JoinGroup, kmsg.SyncGroup:
		return true, true
	case kmsg.Heartbeat, kmsg.ConsumerGroupHeartbeat:
		return true, false
	}
	return false, false
}

// OnBrokerWrite marks a join or sync in flight.
func (c *groupContact) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if _, waits := groupKey(key); waits && err == nil {
		c.joining.Store(time.Now().UnixNano())
	}
}

// OnBrokerRead stamps a group response read; a join's or sync's read,
// whatever its outcome, ends its wait.
func (c *groupContact) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	membership, waits := groupKey(key)
	if !membership {
		return
	}
	if waits {
		c.joining.Store(0)
	}
	if err == nil {
		c.heard.Store(time.Now().UnixNano())
	}
}

// reset starts a new session's record: it has not heard anything yet, and
// counts as in contact from now.
func (c *groupContact) reset(now time.Time) {
	c.heard.Store(now.UnixNano())
	c.joining.Store(0)
}

// silentFor is how long the thread has gone without contact at now: 0
// while a join or sync waits.
func (c *groupContact) silentFor(now time.Time) time.Duration {
	if c.joining.Load() != 0 {
		return 0
	}
	heard := c.heard.Load()
	if heard == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, heard))
}

// registerContactMetrics makes tidemark_out_of_contact_threads count this
// App's threads out of contact, at scrape time.
func (a *App) registerContactMetrics() {
	count := func() float64 { return float64(len(a.silentThreads(time.Now()))) }
	a.metrics.contactFn.Store(&count)
}

// silentThreads returns, by thread index, how long each stream thread
// that has not heard from the coordinator for longer than SessionTimeout
// has been silent.
func (a *App) silentThreads(now time.Time) map[int]time.Duration {
	var out map[int]time.Duration
	for _, t := range a.threads {
		if d := t.contact.silentFor(now); d > a.cfg.SessionTimeout {
			if out == nil {
				out = map[int]time.Duration{}
			}
			out[t.index] = d
		}
	}
	return out
}

// outOfContact returns ErrOutOfContact, saying for how long, when thread
// th has not heard from the coordinator for longer than SessionTimeout.
func (a *App) outOfContact(th int, partition int32, now time.Time) error {
	if th < 0 || th >= len(a.threads) {
		return nil
	}
	if silent := a.threads[th].contact.silentFor(now); silent > a.cfg.SessionTimeout {
		return fmt.Errorf("%w: partition %d: no answer from the group coordinator for %s (session timeout %s)",
			ErrOutOfContact, partition, silent.Round(time.Millisecond), a.cfg.SessionTimeout)
	}
	return nil
}
