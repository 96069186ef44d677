package changelog

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

type winKey struct {
	key   string
	start int64
}

type winRow struct {
	key   string
	start int64
	value string
}

// FetchAll reads Badger through the time index and merges the overlay; a
// model map kept through puts, deletes, expiry, Apply and Discard checks
// it on random ranges, with the overlay empty, full, or a mix over applied
// entries (updates and deletes of applied windows included), on both Apply
// paths.
func TestPropertyWindowFetchAllMatchesAModel(t *testing.T) {
	for _, m := range []struct {
		name       string
		applyEvery int // 0: never apply
		txnLimit   int
	}{
		{"overlay only", 0, 0},
		{"applied after every write", 1, 0},
		{"mixed", 9, 0},
		{"mixed, staged apply", 9, 3},
	} {
		t.Run(m.name, func(t *testing.T) {
			for seed := range uint64(4) {
				checkWindowFetchAllModel(t, seed, m.applyEvery, m.txnLimit)
			}
		})
	}
}

func checkWindowFetchAllModel(t *testing.T, seed uint64, applyEvery, txnLimit int) {
	r := rand.New(rand.NewPCG(seed, uint64(applyEvery)))
	db := openTestDB(t, Options{applyTxnLimit: txnLimit})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 1})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A second store in the same task and DB: its overlay and index
	// entries must never show up.
	o, err := task.Open(store.Spec{Name: "w2", Kind: store.KindWindow, WindowSize: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	w, other := s.(store.Window), o.(store.Window)
	keys := [][]byte{{}, {0}, {0, 0}, {0, 1}, []byte("a"), []byte("a\x00"), []byte("ab"), []byte("b"), {0xff}, {0xff, 0}}
	starts := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	randStart := func() int64 {
		if r.IntN(10) == 0 {
			return starts[r.IntN(len(starts))]
		}
		return int64(r.IntN(40)-10) * 10
	}
	randBound := func() int64 {
		if r.IntN(8) == 0 {
			return starts[r.IntN(len(starts))]
		}
		return int64(r.IntN(50)-15)*10 + int64(r.IntN(3)-1)
	}
	model, committed := map[winKey]string{}, map[winKey]string{}
	cut, committedCut := int64(math.MinInt64), int64(math.MinInt64)
	apply := func() {
		if err := task.Apply(nil); err != nil {
			t.Fatalf("apply: %v", err)
		}
		committed, committedCut = maps.Clone(model), cut
	}
	check := func(op int, from, to int64) {
		t.Helper()
		var want []winRow
		for wk, v := range model {
			if wk.start >= from && wk.start <= to {
				want = append(want, winRow{wk.key, wk.start, v})
			}
		}
		slices.SortFunc(want, func(a, b winRow) int {
			return cmp.Or(bytes.Compare([]byte(a.key), []byte(b.key)), cmp.Compare(a.start, b.start))
		})
		var got []winRow
		if err := w.FetchAll(from, to, func(k []byte, start int64, v []byte) bool {
			got = append(got, winRow{string(k), start, string(v)})
			return true
		}); err != nil {
			t.Fatalf("seed %d op %d: FetchAll(%d, %d): %v", seed, op, from, to, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d op %d (pending %d): FetchAll(%d, %d):\n got  %v\n want %v", seed, op, task.Pending(), from, to, got, want)
		}
		// Stopping early yields a prefix.
		if len(want) > 1 {
			n := 1 + r.IntN(len(want)-1)
			var part []winRow
			if err := w.FetchAll(from, to, func(k []byte, start int64, v []byte) bool {
				part = append(part, winRow{string(k), start, string(v)})
				return len(part) < n
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(part, want[:n]) {
				t.Fatalf("seed %d op %d: FetchAll(%d, %d) stopped after %d: %v, want %v", seed, op, from, to, n, part, want[:n])
			}
		}
	}
	for i := range 2500 {
		k := keys[r.IntN(len(keys))]
		start := randStart()
		wrote := false
		switch op := r.IntN(20); {
		case op < 8:
			v := fmt.Sprintf("v%d", i)
			if err := w.Put(k, start, []byte(v)); err != nil {
				t.Fatal(err)
			}
			if start >= cut {
				model[winKey{string(k), start}] = v
			}
			wrote = true
		case op < 11:
			if err := w.Put(k, start, nil); err != nil {
				t.Fatal(err)
			}
			delete(model, winKey{string(k), start})
			wrote = true
		case op < 13:
			if err := other.Put(k, start, []byte("other")); err != nil {
				t.Fatal(err)
			}
			wrote = true
		case op < 18:
			check(i, randBound(), randBound())
		case op < 19:
			if r.IntN(6) == 0 {
				cut = max(cut, start)
				if err := w.ExpireBefore(cut); err != nil {
					t.Fatal(err)
				}
				maps.DeleteFunc(model, func(wk winKey, _ string) bool { return wk.start < cut })
				wrote = true
			}
		default:
			if applyEvery != 0 && r.IntN(3) == 0 {
				task.Discard()
				model, cut = maps.Clone(committed), committedCut
			}
		}
		if wrote && applyEvery != 0 && r.IntN(applyEvery) == 0 {
			apply()
		}
	}
	check(-1, math.MinInt64, math.MaxInt64)
	apply()
	check(-2, math.MinInt64, math.MaxInt64)
}

// A range that holds many windows spread thinly over the key order (two
// starts of each key's forty) takes the iterator path of FetchAll with
// long gaps between the entries it reads.
func TestWindowFetchAllSparseMatchesAcrossManyKeys(t *testing.T) {
	db := openTestDB(t, Options{})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, WindowSize: 10}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := s.(store.Window)
	model := map[winKey]string{}
	for k := range 300 {
		for st := range int64(40) {
			key := fmt.Sprintf("k%04d", k)
			v := fmt.Sprintf("%d/%d", k, st)
			if err := w.Put([]byte(key), st*10, []byte(v)); err != nil {
				t.Fatal(err)
			}
			model[winKey{key, st * 10}] = v
		}
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	// Overlay: updates, deletes and new windows, some in range.
	for k := 0; k < 300; k += 7 {
		key := fmt.Sprintf("k%04d", k)
		switch k % 3 {
		case 0:
			_ = w.Put([]byte(key), 200, []byte("updated"))
			model[winKey{key, 200}] = "updated"
		case 1:
			_ = w.Put([]byte(key), 210, nil)
			delete(model, winKey{key, 210})
		default:
			_ = w.Put([]byte(key+"x"), 205, []byte("new"))
			model[winKey{key + "x", 205}] = "new"
		}
	}
	for _, r := range [][2]int64{{200, 210}, {0, 0}, {390, 390}, {150, 260}, {math.MinInt64, math.MaxInt64}} {
		var want, got []winRow
		for wk, v := range model {
			if wk.start >= r[0] && wk.start <= r[1] {
				want = append(want, winRow{wk.key, wk.start, v})
			}
		}
		slices.SortFunc(want, func(a, b winRow) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.start, b.start)) })
		if err := w.FetchAll(r[0], r[1], func(k []byte, start int64, v []byte) bool {
			got = append(got, winRow{string(k), start, string(v)})
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("FetchAll(%d, %d): got %d windows, want %d\n got  %v\n want %v", r[0], r[1], len(got), len(want), got, want)
		}
	}
}
