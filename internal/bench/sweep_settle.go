package bench

import (
	"context"
	"fmt"
	"time"
)

// A run that starts while the broker is still busy with the previous one
// (deleting its topics, cleaning compacted changelogs, the JVM compiling
// after a restart) commits slower for tens of seconds, and the policy that
// runs first after the calibrations paid for it: at 10% load its commits
// took 11 ms where the next policies' took 7–9. Every run therefore
// starts once the broker's CPU has been below brokerSettleBusy for one
// brokerSettleWindow, or after brokerSettleMax at most. Quick runs (and
// the tests, which share the broker with other packages' tests) do not
// wait.
const (
	brokerSettleBusy   = 0.10 // of one core; an idle broker here uses ~0.02
	brokerSettleWindow = time.Second
	brokerSettleMax    = 30 * time.Second
)

// settleBroker waits for the broker to go quiet and returns how long that
// took and the broker's busy fraction over the last window (-1 when the
// broker's process is unknown: no wait).
func (s *sweeper) settleBroker(ctx context.Context) (time.Duration, float64) {
	if s.o.BrokerPID == 0 || s.o.Quick {
		return 0, -1
	}
	start := time.Now()
	busy := -1.0
	for time.Since(start) < brokerSettleMax {
		u0, err := readUsage(s.o.BrokerPID)
		if err != nil {
			return time.Since(start), -1
		}
		t0 := time.Now()
		if !sleepCtx(ctx, brokerSettleWindow) {
			break
		}
		u1, err := readUsage(s.o.BrokerPID)
		if err != nil {
			return time.Since(start), -1
		}
		busy = (u1.CPU - u0.CPU).Seconds() / time.Since(t0).Seconds()
		if busy < brokerSettleBusy {
			break
		}
	}
	return time.Since(start), busy
}

func settleText(d time.Duration, busy float64) string {
	if busy < 0 {
		return "no wait for the broker to settle"
	}
	return fmt.Sprintf("broker settled in %.1f s (%.0f%% of a core over the last second)", d.Seconds(), 100*busy)
}
