package changelog

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// BenchmarkVersionedRangeAfterExpiry measures a query of every key's latest
// version (store.VersionedKeyValue.Range, as a versioned table's range
// query reads it) after each of 500 keys had `versions` versions, all but
// the last expired.
func BenchmarkVersionedRangeAfterExpiry(b *testing.B) {
	const keys = 500
	for _, getOnly := range []bool{false, true} {
		for _, versions := range []int{1, 40} {
			b.Run(fmt.Sprintf("get=%v/versions=%d", getOnly, versions), func(b *testing.B) {
				db := openTestDB(b, Options{Logger: quietLog})
				task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
				s, err := task.Open(store.Spec{Name: "v", Kind: store.KindKeyValue}, 0)
				if err != nil {
					b.Fatal(err)
				}
				vs, err := store.NewVersioned(s.(store.KeyValue), 10*time.Millisecond)
				if err != nil {
					b.Fatal(err)
				}
				for i := range keys * versions {
					if err := vs.Put(fmt.Appendf(nil, "k%04d", i%keys), int64(i), []byte("value")); err != nil {
						b.Fatal(err)
					}
					if i%500 == 499 {
						if err := task.Apply(nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := task.Apply(nil); err != nil {
					b.Fatal(err)
				}
				if getOnly {
					for i := 0; b.Loop(); i++ {
						if _, _, found, err := vs.Get(fmt.Appendf(nil, "k%04d", i%keys)); err != nil || !found {
							b.Fatal(found, err)
						}
					}
					return
				}
				got := 0
				for b.Loop() {
					got = 0
					if err := vs.Range(nil, nil, func(_, _ []byte, _ int64) bool { got++; return true }); err != nil {
						b.Fatal(err)
					}
				}
				if got != keys {
					b.Fatalf("Range yielded %d keys, want %d", got, keys)
				}
			})
		}
	}
}
