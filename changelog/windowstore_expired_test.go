package changelog

import (
	"fmt"
	"math"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// A query of every window of a store that has expired windows reads the
// live windows by their index, not by one scan of the whole store: each
// expired window left a tombstone among its key's live windows (and one in
// the index below them) that Badger keeps until compaction, and the scan
// stepped over all of them. With 60 expired windows for each of 7 live
// ones, the query took 16 times as long as on a fresh store
// (BenchmarkWindowFetchAllLive).
func TestWindowFetchAllOfAnExpiringStoreSkipsTheExpired(t *testing.T) {
	db := openTestDB(t, Options{Logger: quietLog})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := s.(*windowStore)
	const keys, starts, live = 100, 10, 3
	for st := range starts {
		for k := range keys {
			if err := w.Put(fmt.Appendf(nil, "k%03d", k), int64(st)*1000, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.ExpireBefore(int64(starts-live) * 1000); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	got := 0
	if err := w.FetchAll(math.MinInt64, math.MaxInt64, func(_ []byte, start int64, _ []byte) bool {
		if start < int64(starts-live)*1000 {
			t.Errorf("FetchAll returned expired window at %d", start)
		}
		got++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if got != keys*live {
		t.Fatalf("FetchAll returned %d windows, want %d", got, keys*live)
	}
	if _, _, whole, err := w.collect(w.st.cutOf(), math.MaxInt64); err != nil {
		t.Fatal(err)
	} else if whole {
		t.Fatal("FetchAll of a store with expired windows scans the whole store, over the expired windows' tombstones")
	}
}
