package changelog

import (
	"fmt"
	"math"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// BenchmarkWindowFetchAllNarrow measures one FetchAll over a narrow range
// (the closed windows of one emit-final step: 10 windows of distinct keys)
// in a window store holding N applied windows, with a small overlay of
// uncommitted writes on top, as on the per-record path of an emit-final
// aggregation. The cost per call should not grow with N.
func BenchmarkWindowFetchAllNarrow(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("windows=%d", n), func(b *testing.B) {
			task, w := benchWindowStore(b)
			// n windows, 10 (distinct keys) per window start.
			const perStart = 10
			starts := n / perStart
			val := make([]byte, 64)
			for i := range n {
				start := int64(i/perStart) * 1000
				key := fmt.Appendf(nil, "key-%06d", (i*7919)%n)
				if err := w.Put(key, start, val); err != nil {
					b.Fatal(err)
				}
				if task.Pending() >= 5000 {
					if err := task.Apply(nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := task.Apply(nil); err != nil {
				b.Fatal(err)
			}
			// An overlay of one commit's writes: 100 updates spread over
			// the store, and one delete in the queried range.
			for i := range 100 {
				start := int64((i*starts/100)%starts) * 1000
				if err := w.Put(fmt.Appendf(nil, "ov-%03d", i), start, val); err != nil {
					b.Fatal(err)
				}
			}
			mid := int64(starts/2) * 1000
			if err := w.Put(fmt.Appendf(nil, "key-%06d", (starts/2*perStart*7919)%n), mid, nil); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			got := 0
			for b.Loop() {
				got = 0
				if err := w.FetchAll(mid, mid, func([]byte, int64, []byte) bool { got++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			if got < perStart {
				b.Fatalf("FetchAll(%d, %d) yielded %d windows, want at least %d", mid, mid, got, perStart)
			}
			b.ReportMetric(float64(got), "windows/op")
		})
	}
}

// benchWindowStore opens a store of 1 s windows in a new task state of a
// new state directory.
func benchWindowStore(b *testing.B) (*TaskState, store.Window) {
	b.Helper()
	db := openTestDB(b, Options{Logger: quietLog})
	task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 1000}, 0)
	if err != nil {
		b.Fatal(err)
	}
	return task, s.(store.Window)
}

// BenchmarkWindowFetchAllClose measures the scan an emit-final tumbling
// count makes when a window closes: every key's window at one start, in a
// store where each key also holds the windows still open after it and the
// tombstones of the windows expired before it (Badger keeps deletes until
// compaction; a key's windows are adjacent in key order). The cost should
// not grow with the windows expired.
func BenchmarkWindowFetchAllClose(b *testing.B) {
	const keys, open = 1000, 7
	for _, expired := range []int{0, 60} {
		b.Run(fmt.Sprintf("expired=%d", expired), func(b *testing.B) {
			task, w := benchWindowStore(b)
			val := make([]byte, 16)
			for s := range expired + open {
				for k := range keys {
					if err := w.Put(fmt.Appendf(nil, "sku-%06d", k), int64(s)*1000, val); err != nil {
						b.Fatal(err)
					}
				}
				if s >= open {
					if err := w.(interface{ ExpireBefore(int64) error }).ExpireBefore(int64(s-open+1) * 1000); err != nil {
						b.Fatal(err)
					}
				}
				if err := task.Apply(nil); err != nil {
					b.Fatal(err)
				}
			}
			closing := int64(expired) * 1000 // the oldest window still open
			got := 0
			for b.Loop() {
				got = 0
				if err := w.FetchAll(closing, closing, func([]byte, int64, []byte) bool { got++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			if got != keys {
				b.Fatalf("FetchAll(%d) yielded %d windows, want %d", closing, got, keys)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/window")
		})
	}
}

// BenchmarkWindowFetchAllLive measures a query of every window of a store
// (FetchAll over all starts, as FetchAllWindows(math.MinInt64,
// math.MaxInt64) reads it) in a store where each key holds the windows
// still open and the tombstones of the windows expired before them. The
// cost should not grow with the windows expired.
func BenchmarkWindowFetchAllLive(b *testing.B) {
	const keys, open = 1000, 7
	for _, expired := range []int{0, 60} {
		b.Run(fmt.Sprintf("expired=%d", expired), func(b *testing.B) {
			task, w := benchWindowStore(b)
			val := make([]byte, 16)
			for s := range expired + open {
				for k := range keys {
					if err := w.Put(fmt.Appendf(nil, "sku-%06d", k), int64(s)*1000, val); err != nil {
						b.Fatal(err)
					}
				}
				if s >= open {
					if err := w.(interface{ ExpireBefore(int64) error }).ExpireBefore(int64(s-open+1) * 1000); err != nil {
						b.Fatal(err)
					}
				}
				if err := task.Apply(nil); err != nil {
					b.Fatal(err)
				}
			}
			got := 0
			for b.Loop() {
				got = 0
				if err := w.FetchAll(math.MinInt64, math.MaxInt64, func([]byte, int64, []byte) bool { got++; return true }); err != nil {
					b.Fatal(err)
				}
			}
			if got != keys*open {
				b.Fatalf("FetchAll yielded %d windows, want %d", got, keys*open)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(keys*open), "ns/window")
		})
	}
}
