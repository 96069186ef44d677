package changelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// BenchmarkHotKeyCount is the state side of `bench sweep`'s count: per
// record a Get and a Put of an 8-byte count under one of 10,000 Zipf(1.2)
// keys, so most records hit a key the open transaction already wrote, and
// an Apply every 8,000 records (a commit at 300k records/s every ~25 ms).
// With layers, every other commit seals the overlay first and applies it
// while the next transaction's writes go on, as pipelined commits do.
func BenchmarkHotKeyCount(b *testing.B) {
	const keys, perCommit = 10_000, 8_000
	for _, layered := range []bool{false, true} {
		b.Run(fmt.Sprintf("layered=%v", layered), func(b *testing.B) {
			db := openTestDB(b, Options{Logger: quietLog})
			task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
			s, err := task.Open(store.Spec{Name: "counts", Kind: store.KindKeyValue}, 0)
			if err != nil {
				b.Fatal(err)
			}
			kv := s.(store.KeyValue)
			zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, keys-1)
			names := make([][]byte, keys)
			for i := range names {
				names[i] = fmt.Appendf(nil, "key-%08d", i)
			}
			var value []byte
			n, round := 0, int64(0)
			for b.Loop() {
				key := names[zipf.Uint64()]
				v, ok, err := kv.Get(key)
				if err != nil {
					b.Fatal(err)
				}
				var c uint64
				if ok {
					c = binary.BigEndian.Uint64(v)
				}
				value = binary.BigEndian.AppendUint64(value[:0], c+1)
				if err := kv.Put(key, value); err != nil {
					b.Fatal(err)
				}
				if n++; n < perCommit {
					continue
				}
				n = 0
				round++
				if err := hotKeyCommit(task, layered, round); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// hotKeyCommit ends the open transaction: applied at once, or (layered)
// the previous sealed layer applied and this one sealed.
func hotKeyCommit(task *TaskState, layered bool, round int64) error {
	offsets := ChangelogOffsets{{"t", 0}: round}
	if !layered {
		return task.Apply(offsets)
	}
	if task.Sealed() {
		if err := task.ApplyAt(offsets, nil); err != nil {
			return err
		}
	}
	if _, err := task.Flush(context.Background()); err != nil {
		return err
	}
	return task.Seal()
}
