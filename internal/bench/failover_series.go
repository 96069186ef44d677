package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SeriesPoint is the staleness of the unmoved partitions' outputs whose
// inputs were sent in one bucket of the failover run, the bucket given by
// its start in seconds relative to the kill (negative: before it). It shows
// whether a steady-state figure is steady: a p99 that decays over the
// steady window is the tail of something that happened before it (the
// load), a flat one is the system's own.
type SeriesPoint struct {
	AtSec float64 `json:"at_seconds"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Count int64   `json:"outputs"`
}

// stalenessSeries buckets the unmoved partitions' outputs with input
// timestamps in [from, to) by bucket, relative to kill.
func stalenessSeries(obs *outputs, moved []int32, kill, from, to time.Time, bucket time.Duration) []SeriesPoint {
	n := int((to.Sub(from) + bucket - 1) / bucket)
	if n <= 0 {
		return nil
	}
	hs := make([]*Staleness, n)
	obs.each(func(o observed) {
		if slices.Contains(moved, o.partition) || o.ts.Before(from) || !o.ts.Before(to) {
			return
		}
		i := int(o.ts.Sub(from) / bucket)
		if hs[i] == nil {
			hs[i] = newStaleness()
		}
		hs[i].record(o.recv.Sub(o.ts))
	})
	out := make([]SeriesPoint, 0, n)
	for i, h := range hs {
		p := SeriesPoint{AtSec: from.Add(time.Duration(i) * bucket).Sub(kill).Seconds()}
		if h != nil {
			p.P50, p.P99, p.Max, p.Count = h.Quantile(50), h.Quantile(99), h.Quantile(100), h.Count
		}
		out = append(out, p)
	}
	return out
}

// Settling after the load. The table's load is a burst of Keys records;
// what a system does after it (the commit controller's estimates still
// sized for the load's large transactions, compactions, standbys catching
// up) can keep its staleness up for tens of seconds after the load's last
// record is committed. A steady-state window taken then measures the
// load's after-effects, not steady state. So the kill waits until the
// staleness of the last settleWindow is within settleTolerance of the one
// before it (both windows end settleLag ago, so that their outputs have
// arrived).
const (
	settleWindow    = 5 * time.Second
	settleLag       = 3 * time.Second
	settleTolerance = 1.2
	settleSlackMs   = 10.0
)

// settle lets the input run at least Settle + Steady past driveStart, then
// until settled says so or SettleMax more has passed. It reports whether
// the system settled, and false for ok when ctx ended.
func (f *failover) settle(ctx context.Context, obs *outputs, driveStart time.Time) (settled, ok bool) {
	least := f.o.Settle + f.o.Steady
	if !sleepCtx(ctx, time.Until(driveStart.Add(least))) {
		return false, false
	}
	deadline := driveStart.Add(least + f.o.SettleMax)
	for {
		if s, why := isSettled(obs, time.Now()); s {
			return true, true
		} else if time.Now().After(deadline) {
			f.progress("  not settled: " + why)
			return false, true
		}
		if !sleepCtx(ctx, time.Second) {
			return false, false
		}
	}
}

// isSettled compares the p99 staleness of all partitions' outputs for
// inputs sent in [now−settleLag−2·settleWindow, now−settleLag−settleWindow)
// and in the settleWindow after it.
func isSettled(obs *outputs, now time.Time) (bool, string) {
	end := now.Add(-settleLag)
	a, b := newStaleness(), newStaleness()
	obs.each(func(o observed) {
		switch {
		case o.ts.Before(end.Add(-2 * settleWindow)):
		case o.ts.Before(end.Add(-settleWindow)):
			a.record(o.recv.Sub(o.ts))
		case o.ts.Before(end):
			b.record(o.recv.Sub(o.ts))
		}
	})
	pa, pb := a.Quantile(99), b.Quantile(99)
	why := fmt.Sprintf("p99 %.0f ms then %.0f ms (%d, %d outputs)", pa, pb, a.Count, b.Count)
	switch {
	case a.Count == 0 || b.Count == 0:
		return false, why
	case pa >= float64((settleLag-settleLag/6).Milliseconds()) || pb >= float64((settleLag-settleLag/6).Milliseconds()):
		return false, why + ": outputs may still be on their way"
	case pb > pa*settleTolerance+settleSlackMs || pb < pa/settleTolerance-settleSlackMs:
		return false, why
	}
	return true, why
}

// outputsEnv names a directory: each failover run writes there every
// output the external consumer saw for inputs sent from 3 s before the
// kill to the end of the restore window, one line each (partition, offset,
// input send and receive time in seconds from the kill, staleness in ms).
// The per-second series shows that a second was slow; these lines show
// which outputs, on which partitions, arrived together: a stall of one
// process or of the broker delays every partition at once, to the
// millisecond, and lines it up with the workers' logs
// (TIDEMARK_BENCH_LOG=debug).
const outputsEnv = "TIDEMARK_BENCH_OUTPUTS"

// dumpOutputs writes the run's outputs around the kill to a file named
// after the case in outputsEnv's directory, if set.
func dumpOutputs(obs *outputs, name string, kill, end time.Time) error {
	dir := os.Getenv(outputsEnv)
	if dir == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kill %s; partition offset sent_s received_s staleness_ms\n", kill.UTC().Format(time.RFC3339Nano))
	obs.each(func(o observed) {
		if o.ts.After(kill.Add(-3*time.Second)) && o.ts.Before(end) {
			fmt.Fprintf(&b, "%d %d %.3f %.3f %.1f\n", o.partition, o.offset, o.ts.Sub(kill).Seconds(),
				o.recv.Sub(kill).Seconds(), float64(o.recv.Sub(o.ts).Microseconds())/1000)
		}
	})
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.txt", name, kill.UTC().Format("20060102-150405")))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("%s: %w", outputsEnv, err)
	}
	return nil
}
