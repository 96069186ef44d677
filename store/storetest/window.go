package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// WinKey addresses one window in a reference model.
type WinKey struct {
	Key   string
	Start int64
}

type winRow struct {
	k     string
	start int64
	v     string
}

func (r winRow) String() string { return fmt.Sprintf("%q@%d=%q", r.k, r.start, r.v) }

// RunWindow runs the window store conformance suite. open returns a new,
// empty store on every call.
func RunWindow(t *testing.T, open func(t *testing.T) store.Window) {
	mk := startSuite(t, open, store.KindWindow)
	t.Run("fetch sees the latest put of that window only", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), 100, []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), 100, []byte("2")), "put")
		mustNoErr(t, s.Put([]byte("a"), 200, []byte("3")), "put")
		v, ok, err := s.Fetch([]byte("a"), 100)
		mustNoErr(t, err, "fetch")
		if !ok {
			t.Fatal("window a@100 not found")
		}
		equalBytes(t, "Fetch(a,100)", v, []byte("2"))
		if _, ok, _ := s.Fetch([]byte("a"), 150); ok {
			t.Fatal("a@150 found but never put")
		}
		if _, ok, _ := s.Fetch([]byte("b"), 100); ok {
			t.Fatal("b@100 found but never put")
		}
	})
	t.Run("nil value deletes the window", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), 100, []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), 100, nil), "put nil")
		mustNoErr(t, s.Put([]byte("never"), 1, nil), "delete of an absent window")
		if _, ok, _ := s.Fetch([]byte("a"), 100); ok {
			t.Fatal("deleted window still present")
		}
	})
	t.Run("fetch range is inclusive, ascending, and only that key", func(t *testing.T) {
		s := mk(t)
		for _, w := range []winRow{
			{"a", 300, "a3"}, {"a", 100, "a1"}, {"a", 200, "a2"}, {"a", -100, "a-1"},
			{"ab", 200, "ab2"}, {"a\x00", 200, "a02"}, {"", 200, "e2"},
		} {
			mustNoErr(t, s.Put([]byte(w.k), w.start, []byte(w.v)), "put")
		}
		cases := []struct {
			name     string
			key      string
			from, to int64
			want     []string
		}{
			{"bounds are inclusive", "a", 100, 300, []string{"a1", "a2", "a3"}},
			{"negative starts sort first", "a", math.MinInt64, math.MaxInt64, []string{"a-1", "a1", "a2", "a3"}},
			{"inner range", "a", 101, 299, []string{"a2"}},
			{"prefix keys are other keys", "ab", 0, 1000, []string{"ab2"}},
			{"empty key is a key", "", 0, 1000, []string{"e2"}},
			{"from > to is empty", "a", 300, 100, nil},
		}
		for _, c := range cases {
			var got []string
			mustNoErr(t, s.FetchRange([]byte(c.key), c.from, c.to, func(start int64, v []byte) bool {
				got = append(got, string(v))
				return true
			}), "fetch range")
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: FetchRange(%q, %d, %d) = %q, want %q", c.name, c.key, c.from, c.to, got, c.want)
			}
		}
	})
	t.Run("fetch all is ordered by key then start", func(t *testing.T) {
		s := mk(t)
		for _, w := range []winRow{{"b", 100, "b1"}, {"a", 200, "a2"}, {"a", 100, "a1"}, {"c", 500, "c5"}, {"ab", 100, "ab1"}} {
			mustNoErr(t, s.Put([]byte(w.k), w.start, []byte(w.v)), "put")
		}
		want := []winRow{{"a", 100, "a1"}, {"a", 200, "a2"}, {"ab", 100, "ab1"}, {"b", 100, "b1"}}
		if got := collectWin(t, s, 0, 200); !slices.Equal(got, want) {
			t.Fatalf("FetchAll(0,200) = %v, want %v", got, want)
		}
	})
	t.Run("fetch stops when fn returns false", func(t *testing.T) {
		s := mk(t)
		for i := range int64(5) {
			mustNoErr(t, s.Put([]byte("a"), i, []byte("v")), "put")
		}
		n := 0
		mustNoErr(t, s.FetchRange([]byte("a"), 0, 10, func(int64, []byte) bool { n++; return false }), "fetch range")
		mustNoErr(t, s.FetchAll(0, 10, func([]byte, int64, []byte) bool { n++; return false }), "fetch all")
		if n != 2 {
			t.Fatalf("fn called %d times, want once per call", n)
		}
	})
	t.Run("expire drops windows that start before the cut", func(t *testing.T) {
		s := mk(t)
		for _, w := range []winRow{{"a", 100, "1"}, {"b", 150, "1"}, {"a", 200, "2"}, {"b", 300, "3"}} {
			mustNoErr(t, s.Put([]byte(w.k), w.start, []byte(w.v)), "put")
		}
		mustNoErr(t, s.ExpireBefore(200), "expire")
		want := []winRow{{"a", 200, "2"}, {"b", 300, "3"}}
		if got := collectWin(t, s, math.MinInt64, math.MaxInt64); !slices.Equal(got, want) {
			t.Fatalf("after ExpireBefore(200) = %v, want %v", got, want)
		}
	})
	t.Run("store copies keys and values that callers reuse", func(t *testing.T) {
		s := mk(t)
		k, v := []byte("k1"), []byte("v1")
		mustNoErr(t, s.Put(k, 1, v), "put")
		copy(k, "k2")
		copy(v, "v2")
		mustNoErr(t, s.Put(k, 1, v), "put")
		copy(k, "XX")
		copy(v, "YY")
		want := []winRow{{"k1", 1, "v1"}, {"k2", 1, "v2"}}
		if got := collectWin(t, s, 0, 10); !slices.Equal(got, want) {
			t.Fatalf("contents = %v, want %v", got, want)
		}
	})
	t.Run("operations after Close return ErrClosed", func(t *testing.T) {
		s := open(t)
		mustNoErr(t, s.Close(), "close")
		if err := s.Put([]byte("a"), 1, []byte("1")); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Put after Close = %v", err)
		}
	})
	t.Run("property: random puts, deletes, expiry and fetches match a map", func(t *testing.T) {
		s := mk(t)
		r := newRand(t)
		model := map[WinKey]string{}
		cut := int64(math.MinInt64)
		for i := range 3000 {
			k := randKey(r)
			start := int64(r.IntN(50)-10) * 10
			switch op := r.IntN(20); {
			case op < 10:
				if start < cut {
					continue // the runtime never writes windows it has expired
				}
				v := randValue(r)
				mustNoErr(t, s.Put(k, start, v), "put")
				model[WinKey{string(k), start}] = string(v)
			case op < 13:
				mustNoErr(t, s.Put(k, start, nil), "put nil")
				delete(model, WinKey{string(k), start})
			case op < 16:
				v, ok, err := s.Fetch(k, start)
				mustNoErr(t, err, "fetch")
				mv, mok := model[WinKey{string(k), start}]
				if ok != mok || string(v) != mv {
					t.Fatalf("op %d: Fetch(%q,%d) = %q,%v; model %q,%v", i, k, start, v, ok, mv, mok)
				}
			case op < 18:
				lo, hi := int64(r.IntN(60)-15)*10, int64(r.IntN(60)-15)*10
				CheckWindowKey(t, s, model, k, lo, hi)
			case op < 19:
				lo, hi := int64(r.IntN(60)-15)*10, int64(r.IntN(60)-15)*10
				CheckWindow(t, s, model, lo, hi)
			default:
				if r.IntN(5) == 0 {
					cut = max(cut, start)
					mustNoErr(t, s.ExpireBefore(cut), "expire")
					for wk := range model {
						if wk.Start < cut {
							delete(model, wk)
						}
					}
				}
			}
		}
		CheckWindow(t, s, model, math.MinInt64, math.MaxInt64)
	})
}

// CheckWindow fails t unless s.FetchAll(from, to) yields exactly the windows
// of model with start in [from, to].
func CheckWindow(t *testing.T, s store.Window, model map[WinKey]string, from, to int64) {
	t.Helper()
	var want []winRow
	for wk, v := range model {
		if wk.Start >= from && wk.Start <= to {
			want = append(want, winRow{wk.Key, wk.Start, v})
		}
	}
	slices.SortFunc(want, func(a, b winRow) int {
		return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.start, b.start))
	})
	if got := collectWin(t, s, from, to); !slices.Equal(got, want) {
		t.Fatalf("FetchAll(%d, %d):\n got  %v\n want %v", from, to, got, want)
	}
}

// CheckWindowKey fails t unless s.FetchRange(key, from, to) yields exactly
// the windows of key in model with start in [from, to].
func CheckWindowKey(t *testing.T, s store.Window, model map[WinKey]string, key []byte, from, to int64) {
	t.Helper()
	var want, got []winRow
	for wk, v := range model {
		if wk.Key == string(key) && wk.Start >= from && wk.Start <= to {
			want = append(want, winRow{wk.Key, wk.Start, v})
		}
	}
	slices.SortFunc(want, func(a, b winRow) int { return cmp.Compare(a.start, b.start) })
	mustNoErr(t, s.FetchRange(key, from, to, func(start int64, v []byte) bool {
		got = append(got, winRow{string(key), start, string(v)})
		return true
	}), "fetch range")
	if !slices.Equal(got, want) {
		t.Fatalf("FetchRange(%q, %d, %d):\n got  %v\n want %v", key, from, to, got, want)
	}
}

func collectWin(t *testing.T, s store.Window, from, to int64) []winRow {
	t.Helper()
	var got []winRow
	mustNoErr(t, s.FetchAll(from, to, func(k []byte, start int64, v []byte) bool {
		got = append(got, winRow{string(k), start, string(v)})
		return true
	}), "fetch all")
	return got
}
