package frontier

import (
	"testing"
	"time"
)

// After a bulk load whose transactions took 1.5 s to commit, commits take
// 10 ms again: the controller must come back to short intervals within a
// few seconds, not decay its latency estimate by 1/8 per commit while the
// long intervals it chose keep those commits rare (multi-second staleness
// for tens of seconds, seen in the failover bench after its 1M-key load).
func TestCommitLatencyEstimateRecoversAfterABulkLoad(t *testing.T) {
	r := newRig(t, Options{}, 1500*time.Millisecond, 20*time.Microsecond)
	r.run(15*time.Second, 2000)
	if r.last.Interval < 500*time.Millisecond {
		t.Fatalf("during 1.5s commits the interval is %v; the test needs the controller to have backed off", r.last.Interval)
	}
	r.lat = 10 * time.Millisecond
	before := len(r.commits)
	// With commits 3 s apart the first fast one may come up to 3 s after
	// the change: allow that on top of the ~5 s the estimates take.
	r.run(8*time.Second, 2000)
	if r.last.Interval > 100*time.Millisecond {
		t.Fatalf("8s after commits became fast (%d commits since) the interval is still %v, latency estimate %v",
			len(r.commits)-before, r.last.Interval, time.Duration(r.c.latency.mean*1e9))
	}
}
