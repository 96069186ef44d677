package changelog

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// BenchmarkQueueScanAfterDeletes measures a key-value store used as a
// time-ordered queue, as suppress buffers and outer joins use theirs: each
// op adds an entry at the newest time, scans from the start up to a cut
// and deletes what it finds. Deleted entries stay as tombstones in Badger
// until compaction; the cost per op should not grow with them.
func BenchmarkQueueScanAfterDeletes(b *testing.B) {
	for _, deleted := range []int{0, 20000} {
		b.Run(fmt.Sprintf("deleted=%d", deleted), func(b *testing.B) {
			db := openTestDB(b, Options{Logger: quietLog})
			task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
			s, err := task.Open(store.Spec{Name: "q", Kind: store.KindKeyValue}, 0)
			if err != nil {
				b.Fatal(err)
			}
			kv := s.(store.KeyValue)
			val := make([]byte, 32)
			i := uint64(0)
			op := func() {
				i++
				if err := kv.Put(binary.BigEndian.AppendUint64(nil, i), val); err != nil {
					b.Fatal(err)
				}
				var due [][]byte
				if err := kv.Range(nil, binary.BigEndian.AppendUint64(nil, i-min(i, 50)), func(k, _ []byte) bool {
					due = append(due, append([]byte(nil), k...))
					return true
				}); err != nil {
					b.Fatal(err)
				}
				for _, k := range due {
					if err := kv.Delete(k); err != nil {
						b.Fatal(err)
					}
				}
				if i%500 == 0 {
					if err := task.Apply(nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			for range deleted {
				op()
			}
			b.ResetTimer()
			for b.Loop() {
				op()
			}
		})
	}
}
