package changelog

import (
	"fmt"
	"testing"
)

// BenchmarkApplyWithExpiry measures one commit of a windowed aggregation
// whose store already expired `expired` window starts (their deletes are
// tombstones in Badger until compaction): 100 window writes at the newest
// start and an expiry cut raised by one start, as every commit of a
// tumbling-window count does. The cost per commit should not grow with the
// windows expired before it.
func BenchmarkApplyWithExpiry(b *testing.B) {
	for _, expired := range []int{100, 2000} {
		b.Run(fmt.Sprintf("expired=%d", expired), func(b *testing.B) {
			task, w := benchWindowStore(b)
			val := make([]byte, 16)
			const live, perStart = 5, 100
			start := int64(0)
			commit := func() {
				for k := range perStart {
					if err := w.Put(fmt.Appendf(nil, "key-%03d", k), start*1000, val); err != nil {
						b.Fatal(err)
					}
				}
				if start >= live {
					if err := w.(interface{ ExpireBefore(int64) error }).ExpireBefore((start - live + 1) * 1000); err != nil {
						b.Fatal(err)
					}
				}
				if err := task.Apply(nil); err != nil {
					b.Fatal(err)
				}
				start++
			}
			for range expired + live {
				commit()
			}
			b.ResetTimer()
			for b.Loop() {
				commit()
			}
		})
	}
}
