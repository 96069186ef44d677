package changelog

import (
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
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
			db := openTestDB(b, Options{Logger: quietLog})
			task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
			s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 1000}, 0)
			if err != nil {
				b.Fatal(err)
			}
			w := s.(store.Window)
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
