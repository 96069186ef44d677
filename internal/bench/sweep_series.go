package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// seriesEnv names a file to which a sweep run appends, per second of input
// time, the count outputs' staleness (p50, p99, max) and how many there
// were: the phase table's p99 says how bad a phase was, this says when
// (the restart after the SIGKILL, a controller's excursion).
const seriesEnv = "TIDEMARK_BENCH_SERIES"

// observeSecond records one count output's staleness under the second of
// input time sec.
func (o *sweepObserver) observeSecond(sec int, us int64) {
	if o.perSec == nil {
		return
	}
	h := o.perSec[sec]
	if h == nil {
		h = hdrhistogram.New(1, int64(10*60*1e6), 2)
		o.perSec[sec] = h
	}
	_ = h.RecordValue(us)
}

// writeSeries appends the run's per-second staleness to the file named by
// TIDEMARK_BENCH_SERIES, one JSON object per line.
func (o *sweepObserver) writeSeries(policy string, repeat int) error {
	path := os.Getenv(seriesEnv)
	if path == "" || o.perSec == nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("series: %w", err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, sec := range slices.Sorted(maps.Keys(o.perSec)) {
		h := o.perSec[sec]
		row := map[string]any{"policy": policy, "repeat": repeat, "second": sec, "n": h.TotalCount(),
			"p50_ms": float64(h.ValueAtQuantile(50)) / 1000, "p99_ms": float64(h.ValueAtQuantile(99)) / 1000,
			"max_ms": float64(h.Max()) / 1000}
		if err := enc.Encode(row); err != nil {
			return fmt.Errorf("series: %w", err)
		}
	}
	return nil
}
