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

// SessKey addresses one session in a reference model.
type SessKey struct {
	Key        string
	Start, End int64
}

type sessRow struct {
	start, end int64
	v          string
}

func (r sessRow) String() string { return fmt.Sprintf("[%d,%d]=%q", r.start, r.end, r.v) }

// RunSession runs the session store conformance suite. open returns a new,
// empty store on every call.
func RunSession(t *testing.T, open func(t *testing.T) store.Session) {
	mk := startSuite(t, open, store.KindSession)
	t.Run("find returns mergeable sessions ordered by end then start", func(t *testing.T) {
		s := mk(t)
		for _, x := range []struct {
			k          string
			start, end int64
		}{
			{"a", 0, 10}, {"a", 20, 30}, {"a", 5, 30}, {"a", 40, 50}, {"a", 100, 120},
			{"ab", 20, 30}, {"a\x00", 20, 30},
		} {
			mustNoErr(t, s.Put([]byte(x.k), x.start, x.end, []byte(fmt.Sprintf("%s%d-%d", x.k, x.start, x.end))), "put")
		}
		// A record at t=35 with a 10ms gap merges with sessions ending at
		// or after 25 and starting at or before 45.
		want := []sessRow{{5, 30, "a5-30"}, {20, 30, "a20-30"}, {40, 50, "a40-50"}}
		if got := collectSess(t, s, []byte("a"), 25, 45); !slices.Equal(got, want) {
			t.Fatalf("FindSessions(a, 25, 45) = %v, want %v", got, want)
		}
		if got := collectSess(t, s, []byte("a"), 10, 10); !slices.Equal(got, []sessRow{{0, 10, "a0-10"}, {5, 30, "a5-30"}}) {
			t.Fatalf("FindSessions(a, 10, 10) = %v: bounds must be inclusive", got)
		}
		if got := collectSess(t, s, []byte("ab"), math.MinInt64, math.MaxInt64); !slices.Equal(got, []sessRow{{20, 30, "ab20-30"}}) {
			t.Fatalf("FindSessions(ab) = %v: prefix keys are other keys", got)
		}
	})
	t.Run("put overwrites and remove deletes one session", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), 0, 10, []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), 0, 10, []byte("2")), "put")
		mustNoErr(t, s.Put([]byte("a"), 0, 20, []byte("3")), "put")
		mustNoErr(t, s.Remove([]byte("a"), 0, 20), "remove")
		mustNoErr(t, s.Remove([]byte("never"), 0, 20), "remove of an absent session")
		if got := collectSess(t, s, []byte("a"), math.MinInt64, math.MaxInt64); !slices.Equal(got, []sessRow{{0, 10, "2"}}) {
			t.Fatalf("sessions = %v", got)
		}
	})
	t.Run("find stops when fn returns false", func(t *testing.T) {
		s := mk(t)
		for i := range int64(5) {
			mustNoErr(t, s.Put([]byte("a"), i, i, []byte("v")), "put")
		}
		n := 0
		mustNoErr(t, s.FindSessions([]byte("a"), 0, 10, func(int64, int64, []byte) bool { n++; return false }), "find")
		if n != 1 {
			t.Fatalf("fn called %d times after returning false", n)
		}
	})
	t.Run("expire drops sessions that end before the cut", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), 0, 10, []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), 0, 20, []byte("2")), "put")
		mustNoErr(t, s.Put([]byte("b"), 5, 19, []byte("3")), "put")
		mustNoErr(t, s.ExpireBefore(20), "expire")
		if got := collectSess(t, s, []byte("a"), math.MinInt64, math.MaxInt64); !slices.Equal(got, []sessRow{{0, 20, "2"}}) {
			t.Fatalf("a after ExpireBefore(20) = %v", got)
		}
		if got := collectSess(t, s, []byte("b"), math.MinInt64, math.MaxInt64); len(got) != 0 {
			t.Fatalf("b after ExpireBefore(20) = %v", got)
		}
	})
	t.Run("operations after Close return ErrClosed", func(t *testing.T) {
		s := open(t)
		mustNoErr(t, s.Close(), "close")
		if err := s.Put([]byte("a"), 1, 2, []byte("1")); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Put after Close = %v", err)
		}
	})
	t.Run("property: random puts, removes, expiry and finds match a map", func(t *testing.T) {
		s := mk(t)
		r := newRand(t)
		model := map[SessKey]string{}
		cut := int64(math.MinInt64)
		for i := range 3000 {
			k := randKey(r)
			start := int64(r.IntN(40)-5) * 10
			end := start + int64(r.IntN(5))*10
			switch op := r.IntN(20); {
			case op < 10:
				if end < cut {
					continue
				}
				v := randValue(r)
				mustNoErr(t, s.Put(k, start, end, v), "put")
				model[SessKey{string(k), start, end}] = string(v)
			case op < 13:
				mustNoErr(t, s.Remove(k, start, end), "remove")
				delete(model, SessKey{string(k), start, end})
			case op < 19:
				lo, hi := int64(r.IntN(50)-10)*10, int64(r.IntN(50)-10)*10
				CheckSession(t, s, model, k, lo, hi)
			default:
				if r.IntN(5) == 0 {
					cut = max(cut, end)
					mustNoErr(t, s.ExpireBefore(cut), "expire")
					for sk := range model {
						if sk.End < cut {
							delete(model, sk)
						}
					}
				}
			}
			_ = i
		}
		for k := range 40 {
			CheckSession(t, s, model, fmt.Appendf(nil, "k%d", k), math.MinInt64, math.MaxInt64)
		}
	})
}

// CheckSession fails t unless s.FindSessions(key, earliestEnd, latestStart)
// yields exactly the matching sessions of model.
func CheckSession(t *testing.T, s store.Session, model map[SessKey]string, key []byte, earliestEnd, latestStart int64) {
	t.Helper()
	var want []sessRow
	for sk, v := range model {
		if sk.Key == string(key) && sk.End >= earliestEnd && sk.Start <= latestStart {
			want = append(want, sessRow{sk.Start, sk.End, v})
		}
	}
	slices.SortFunc(want, func(a, b sessRow) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start)) })
	if got := collectSess(t, s, key, earliestEnd, latestStart); !slices.Equal(got, want) {
		t.Fatalf("FindSessions(%q, %d, %d):\n got  %v\n want %v", key, earliestEnd, latestStart, got, want)
	}
}

func collectSess(t *testing.T, s store.Session, key []byte, earliestEnd, latestStart int64) []sessRow {
	t.Helper()
	var got []sessRow
	mustNoErr(t, s.FindSessions(key, earliestEnd, latestStart, func(start, end int64, v []byte) bool {
		got = append(got, sessRow{start, end, string(v)})
		return true
	}), "find sessions")
	return got
}
