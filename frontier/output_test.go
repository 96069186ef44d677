package frontier

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestFrontierRules(t *testing.T) {
	ms := func(v int64) time.Time { return time.UnixMilli(v) }
	tests := []struct {
		name  string
		marks map[int32][]Mark // applied in order
		at    time.Time
		want  bool
	}{
		{"an empty frontier covers nothing", nil, ms(0), false},
		{"a partition without a mark holds the frontier back", map[int32][]Mark{0: {{10, 1000}}}, ms(5), false},
		{"covered when every partition is past the event time", map[int32][]Mark{0: {{10, 1000}}, 1: {{3, 900}}}, ms(900), true},
		{"the slowest partition decides", map[int32][]Mark{0: {{10, 1000}}, 1: {{3, 900}}}, ms(901), false},
		{"a stale mark cannot move a partition back", map[int32][]Mark{0: {{10, 1000}, {5, 100}}, 1: {{3, 1000}}}, ms(1000), true},
		{"sub-millisecond event times round up", map[int32][]Mark{0: {{1, 10}}, 1: {{1, 10}}}, ms(10).Add(500 * time.Microsecond), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFrontier("inventory", 2)
			for p, ms := range tt.marks {
				for _, m := range ms {
					if _, err := f.Advance(p, m); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := f.Covers(tt.at); got != tt.want {
				t.Errorf("Covers(%v) = %v, want %v; marks %v", tt.at.UnixMilli(), got, tt.want, f.Marks)
			}
		})
	}
}

func TestFrontierAdvanceReportsMovement(t *testing.T) {
	f := NewFrontier("s", 1)
	if moved, _ := f.Advance(0, Mark{5, 50}); !moved {
		t.Fatal("first mark did not move the frontier")
	}
	if moved, _ := f.Advance(0, Mark{5, 50}); moved {
		t.Fatal("a repeated mark moved the frontier")
	}
	if moved, _ := f.Advance(0, Mark{4, 60}); !moved || f.Marks[0] != (Mark{5, 60}) {
		t.Fatalf("join of {5 50} and {4 60} = %v, want {5 60} and moved", f.Marks[0])
	}
	if _, err := f.Advance(1, Mark{1, 1}); err == nil {
		t.Fatal("advancing a partition out of range did not fail")
	}
}

// TestMergeIsAJoin checks the semilattice laws on random frontiers: merging
// in any order and any number of times gives the same frontier.
func TestMergeIsAJoin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() Frontier {
		f := NewFrontier("s", 1+r.IntN(4))
		for i := range f.Marks {
			if r.IntN(4) > 0 {
				f.Marks[i] = Mark{r.Int64N(100), r.Int64N(1000)}
			}
		}
		return f
	}
	merge := func(fs ...Frontier) Frontier {
		out := NewFrontier("s", 0)
		for _, f := range fs {
			if err := out.Merge(f); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for i := 0; i < 200; i++ {
		a, b, c := gen(), gen(), gen()
		abc := merge(a, b, c)
		for _, perm := range [][]Frontier{{c, b, a}, {b, a, c, a}, {a, b, c, c, b}} {
			if got := merge(perm...); !reflect.DeepEqual(got, abc) {
				t.Fatalf("merge order changed the result: %v vs %v", got, abc)
			}
		}
	}
	other := NewFrontier("other", 1)
	if err := other.Merge(NewFrontier("s", 1)); err == nil {
		t.Fatal("merging frontiers of different sinks did not fail")
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	f := NewFrontier("orders-availability", 3)
	f.Marks[0] = Mark{123456, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}
	f.Marks[2] = Mark{0, -5}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g Frontier
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("binary round trip: %v, want %v", g, f)
	}
	j, _ := json.Marshal(f)
	var h Frontier
	if err := json.Unmarshal(j, &h); err != nil || !reflect.DeepEqual(f, h) {
		t.Fatalf("JSON round trip: %v (%v), want %v", h, err, f)
	}
	for _, m := range f.Marks {
		mb, _ := m.MarshalBinary()
		var got Mark
		if err := got.UnmarshalBinary(mb); err != nil || got != m {
			t.Fatalf("mark round trip: %v (%v), want %v", got, err, m)
		}
	}
	if err := g.UnmarshalBinary(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated value: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodeFrontier(f *testing.F) {
	seed := NewFrontier("s", 2)
	seed.Marks[1] = Mark{7, 99}
	b, _ := seed.MarshalBinary()
	f.Add(b)
	mb, _ := Mark{1, 2}.MarshalBinary()
	f.Add(mb)
	f.Add([]byte{1, 0, 255, 255, 255, 255, 15})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frontier
		if err := fr.UnmarshalBinary(b); err == nil {
			re, err := fr.MarshalBinary()
			if err != nil {
				t.Fatalf("decoded frontier does not re-encode: %v", err)
			}
			var again Frontier
			if err := again.UnmarshalBinary(re); err != nil || !reflect.DeepEqual(fr, again) {
				t.Fatalf("re-decode: %v (%v), want %v", again, err, fr)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
		}
		var m Mark
		if err := m.UnmarshalBinary(b); err == nil {
			re, _ := m.MarshalBinary()
			var again Mark
			if err := again.UnmarshalBinary(re); err != nil || again != m {
				t.Fatalf("mark re-decode: %v (%v), want %v", again, err, m)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("mark decode error %v does not wrap ErrCorrupt", err)
		}
	})
}
