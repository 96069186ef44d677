package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// seriesEnv names a file to which a sweep or tenant-burst run appends, per
// second of input time, the outputs' staleness (p50, p99, max) and how many
// there were: a window's p99 says how bad it was, this says when (the
// restart after the SIGKILL, a controller's excursion, a stall during a
// burst).
const seriesEnv = "TIDEMARK_BENCH_SERIES"

// secondSeries is a staleness histogram per second of input time; nil
// (TIDEMARK_BENCH_SERIES unset) records nothing.
type secondSeries map[int]*hdrhistogram.Histogram

// newSecondSeries is a series when TIDEMARK_BENCH_SERIES is set, else nil.
func newSecondSeries() secondSeries {
	if os.Getenv(seriesEnv) == "" {
		return nil
	}
	return secondSeries{}
}

// observe records one output's staleness under the second of input time
// sec.
func (s secondSeries) observe(sec int, us int64) {
	if s == nil {
		return
	}
	h := s[sec]
	if h == nil {
		h = hdrhistogram.New(1, int64(10*60*1e6), 2)
		s[sec] = h
	}
	_ = h.RecordValue(us)
}

// write appends the series to the file named by TIDEMARK_BENCH_SERIES, one
// JSON object per second with labels' fields.
func (s secondSeries) write(labels map[string]any) error {
	path := os.Getenv(seriesEnv)
	if path == "" || s == nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("series: %w", err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, sec := range slices.Sorted(maps.Keys(s)) {
		h := s[sec]
		row := map[string]any{"second": sec, "n": h.TotalCount(),
			"p50_ms": float64(h.ValueAtQuantile(50)) / 1000, "p99_ms": float64(h.ValueAtQuantile(99)) / 1000,
			"max_ms": float64(h.Max()) / 1000}
		maps.Copy(row, labels)
		if err := enc.Encode(row); err != nil {
			return fmt.Errorf("series: %w", err)
		}
	}
	return nil
}
