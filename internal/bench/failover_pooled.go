package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pooled p99 over a case's runs.
//
// A restore window holds about 3,000 outputs of the unmoved partitions, so
// its p99 is the 30th stalest: one commit that stalls 100 ms anywhere in the
// window (a slow produce ack, the machine's other load) holds up a few
// hundred outputs and sets the run's p99 by itself, in either window. The
// per-run ratio then swings between 0.4 and 5 on the same code (failover
// runs of 2026-12-05). Pooling every run's outputs of one window type, and
// taking the p99 of the pool, estimates the same quantile from five or ten
// times the outputs; the per-run figures stay in the report beside it.

// msCounts is a sparse staleness histogram with 1 ms buckets: pairs of
// (milliseconds, outputs), in increasing milliseconds. It is small enough
// to keep per run in results.json (a few hundred pairs), so the pooled
// figures can be recomputed from a stored report.
type msCounts [][2]int64

// countMs buckets staleness d (floored to the millisecond) into m.
func countMs(m map[int64]int64, d time.Duration) {
	m[max(0, d.Milliseconds())]++
}

// newMsCounts turns a bucket map into its sorted pairs.
func newMsCounts(m map[int64]int64) msCounts {
	out := make(msCounts, 0, len(m))
	for _, ms := range slices.Sorted(maps.Keys(m)) {
		out = append(out, [2]int64{ms, m[ms]})
	}
	return out
}

// pool merges histograms.
func pool(hs ...msCounts) msCounts {
	m := map[int64]int64{}
	for _, h := range hs {
		for _, p := range h {
			m[p[0]] += p[1]
		}
	}
	return newMsCounts(m)
}

// quantile is the smallest bucket (ms) at or below which at least q% of
// the outputs fall, the nearest-rank definition; 0 without outputs.
func (h msCounts) quantile(q float64) float64 {
	var n int64
	for _, p := range h {
		n += p[1]
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q / 100 * float64(n)))
	var seen int64
	for _, p := range h {
		seen += p[1]
		if seen >= rank {
			return float64(p[0])
		}
	}
	return float64(h[len(h)-1][0])
}

// pooledP99 is the p99 (ms) of the steady and of the restore-window
// outputs of every run in g without an error, and how many runs carried
// histograms; zero when none did (reports written before they were kept).
func pooledP99(g []FailoverResult) (steady, takeover float64, runs int) {
	var ss, ts []msCounts
	for _, x := range g {
		if x.Error != "" || len(x.SteadyMs) == 0 || len(x.TakeoverMs) == 0 {
			continue
		}
		ss, ts = append(ss, x.SteadyMs), append(ts, x.TakeoverMs)
	}
	if len(ss) == 0 {
		return 0, 0, 0
	}
	return pool(ss...).quantile(99), pool(ts...).quantile(99), len(ss)
}

// MarshalJSON writes the pairs as one string, "ms:n ms:n …": as an array
// of pairs, results.json (written indented) grew by four lines per bucket,
// about a thousand per run.
func (h msCounts) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	for i, p := range h {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(p[0], 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(p[1], 10))
	}
	return json.Marshal(b.String())
}

// UnmarshalJSON reads MarshalJSON's string, and the array of pairs that
// reports written before it hold.
func (h *msCounts) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var pairs [][2]int64
		if perr := json.Unmarshal(data, &pairs); perr != nil {
			return fmt.Errorf("staleness buckets: %w", err)
		}
		*h = pairs
		return nil
	}
	out := msCounts{}
	for _, f := range strings.Fields(s) {
		ms, n, ok := strings.Cut(f, ":")
		if !ok {
			return fmt.Errorf("staleness bucket %q: want ms:count", f)
		}
		a, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return fmt.Errorf("staleness bucket %q: %w", f, err)
		}
		c, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return fmt.Errorf("staleness bucket %q: %w", f, err)
		}
		out = append(out, [2]int64{a, c})
	}
	*h = out
	return nil
}
