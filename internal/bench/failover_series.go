package bench

import (
	"slices"
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
