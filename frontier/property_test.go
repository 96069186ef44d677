package frontier

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestInvariantsUnderRandomObservations drives controllers with random
// sequences of observations, commits, acks and aborts, and checks the
// package invariants after every Tick.
func TestInvariantsUnderRandomObservations(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		o := Options{
			MinInterval:     time.Duration(1+r.IntN(20)) * time.Millisecond,
			StalenessTarget: time.Duration(5+r.IntN(500)) * time.Millisecond,
			Tenants:         map[string]TenantOptions{"a": {StalenessTarget: time.Duration(5+r.IntN(100)) * time.Millisecond}},
		}
		if seed%4 == 0 {
			o.Policy = PolicyFixed
		}
		c, err := NewController(o)
		if err != nil {
			t.Fatal(err)
		}
		o = c.Options()
		now := t0
		inFlight, dirty := false, false
		var lastStart time.Time
		started := false
		for i := 0; i < 3000; i++ {
			now = now.Add(time.Duration(r.IntN(3000)) * time.Microsecond)
			switch r.IntN(8) {
			case 0:
				c.ObserveArrivals(now, r.IntN(50))
			case 1:
				n := r.IntN(50)
				c.ObserveProcessed(now, n, time.Duration(n*r.IntN(300))*time.Microsecond)
				dirty = dirty || n > 0
			case 2:
				tenant := []string{"", "a", "b"}[r.IntN(3)]
				n := r.IntN(5)
				c.ObserveOutput(now, tenant, now.Add(-time.Duration(r.IntN(1000))*time.Millisecond), n)
				dirty = dirty || n > 0
			case 3:
				c.ObserveWatermark(now, now, r.IntN(2))
			case 4:
				if inFlight {
					if r.IntN(5) == 0 {
						c.ObserveCommitAborted(now)
						dirty = true
					} else {
						c.ObserveCommitFinished(now, CommitAck{Cost: time.Duration(r.IntN(20)) * time.Millisecond})
					}
					inFlight = false
				}
			default:
				d := c.Tick(now)
				if d.Commit && inFlight {
					t.Fatalf("seed %d step %d: commit while one is in flight", seed, i)
				}
				if d.Commit && !dirty {
					t.Fatalf("seed %d step %d: commit with nothing processed or produced", seed, i)
				}
				if o.Policy == PolicyAdaptive && (d.Interval < o.MinInterval || d.Interval > o.MaxInterval) {
					t.Fatalf("seed %d step %d: interval %v outside [%v, %v]", seed, i, d.Interval, o.MinInterval, o.MaxInterval)
				}
				if o.Policy == PolicyFixed && d.Interval != o.FixedInterval {
					t.Fatalf("seed %d step %d: fixed interval %v, want %v", seed, i, d.Interval, o.FixedInterval)
				}
				if d.Commit {
					if started && now.Sub(lastStart) < o.MinInterval {
						t.Fatalf("seed %d step %d: commits %v apart, below Tmin %v", seed, i, now.Sub(lastStart), o.MinInterval)
					}
					// Under the fixed policy only the interval and a listed
					// tenant's tighter target ("a") commit.
					if o.Policy == PolicyFixed && d.Reason != ReasonInterval &&
						(d.Reason != ReasonStaleness || o.Tenants["a"].StalenessTarget >= o.FixedInterval) {
						t.Fatalf("seed %d step %d: fixed policy committed for %v", seed, i, d.Reason)
					}
					c.ObserveCommitStarted(now)
					inFlight, dirty, started, lastStart = true, false, true, now
				}
			}
		}
	}
}
