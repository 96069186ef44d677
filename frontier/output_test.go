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

func TestViewRules(t *testing.T) {
	task := func(sub, p int32) TaskRef { return TaskRef{SubTopology: sub, Partition: p} }
	mark := func(sub, p int32, wm int64, idle bool) TaskMark {
		return TaskMark{TaskRef: task(sub, p), WatermarkMs: wm, Idle: idle}
	}
	feeds := []Feed{{SubTopology: 0, Tasks: 2}, {SubTopology: 2, Tasks: 1}}
	rec := func(offs []int64, marks ...TaskMark) Record {
		return Record{Sink: "out", Offsets: offs, Feeds: feeds, Tasks: marks}
	}
	type put struct {
		key string
		rec *Record // nil: tombstone
	}
	p := func(key string, r Record) put { return put{key, &r} }
	tests := []struct {
		name      string
		puts      []put
		wantWM    int64
		wantOffs  []int64
		uncovered int
	}{
		{"a task without a mark covers nothing",
			[]put{p("out@a", rec([]int64{5}, mark(0, 0, 900, false), mark(0, 1, 800, false)))},
			NoWatermark, []int64{5}, 1},
		{"the minimum over the tasks of every feeding sub-topology",
			[]put{p("out@a", rec([]int64{5, -1}, mark(0, 0, 900, false), mark(2, 0, 700, false))), p("out@b", rec([]int64{-1, 9}, mark(0, 1, 800, false)))},
			700, []int64{5, 9}, 0},
		{"a task that moved: the greatest mark over the records counts",
			[]put{p("out@a", rec(nil, mark(0, 0, 900, false), mark(0, 1, 300, false), mark(2, 0, 999, false))), p("out@b", rec(nil, mark(0, 1, 850, false)))},
			850, nil, 0},
		{"idle marks count like any other for readers",
			[]put{p("out@a", rec(nil, mark(0, 0, 900, true), mark(0, 1, 800, true), mark(2, 0, 999, false)))},
			800, nil, 0},
		{"a newer record of a key replaces the older",
			[]put{p("out@a", rec([]int64{7}, mark(0, 0, 900, false), mark(0, 1, 900, false), mark(2, 0, 900, false))), p("out@a", rec([]int64{3}, mark(0, 0, 100, false), mark(0, 1, 100, false), mark(2, 0, 100, false)))},
			100, []int64{3}, 0},
		{"a tombstone removes a record",
			[]put{p("out@a", rec(nil, mark(0, 0, 900, false), mark(0, 1, 900, false), mark(2, 0, 900, false))), p("out@b", rec(nil, mark(0, 0, 100, false))), {"out@b", nil}},
			900, nil, 0},
		{"version-1 records give offsets, never coverage",
			[]put{p("out@old", Record{Sink: "out", Offsets: []int64{4, 4}, Legacy: []int64{1 << 40, 1 << 40}})},
			NoWatermark, []int64{4, 4}, 0},
		{"records of other sinks are ignored",
			[]put{p("other@a", Record{Sink: "other", Offsets: []int64{99}, Feeds: feeds, Tasks: []TaskMark{mark(0, 0, 5, false)}}), p("out@a", rec([]int64{1}, mark(0, 0, 10, false), mark(0, 1, 10, false), mark(2, 0, 10, false)))},
			10, []int64{1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewView()
			for _, pu := range tt.puts {
				if pu.rec == nil {
					v.Delete(pu.key)
				} else {
					v.Put(pu.key, *pu.rec)
				}
			}
			st, ok := v.Sink("out")
			if !ok {
				t.Fatal("no status for out")
			}
			if st.WatermarkMs != tt.wantWM || st.UncoveredCount != tt.uncovered {
				t.Fatalf("watermark %d, %d uncovered; want %d, %d (%+v)", st.WatermarkMs, st.UncoveredCount, tt.wantWM, tt.uncovered, st)
			}
			var offs []int64
			for _, m := range st.Partitions {
				offs = append(offs, m.Offset)
				if m.WatermarkMs != st.WatermarkMs {
					t.Fatalf("partition mark %v does not carry the sink watermark %d", m, st.WatermarkMs)
				}
			}
			if !reflect.DeepEqual(offs, tt.wantOffs) {
				t.Fatalf("offsets %v, want %v", offs, tt.wantOffs)
			}
			if got := st.Covers(time.UnixMilli(tt.wantWM)); got != (tt.wantWM != NoWatermark) {
				t.Fatalf("Covers(watermark) = %v", got)
			}
		})
	}
	if _, ok := NewView().Sink("out"); ok {
		t.Fatal("an empty view has a status")
	}
}

// TestTaskMarkJoinIsASemilattice: marks merge in any order, any number of
// times; on equal watermarks the idle mark wins.
func TestTaskMarkJoinIsASemilattice(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	gen := func() TaskMark {
		return TaskMark{TaskRef: TaskRef{1, 2}, WatermarkMs: r.Int64N(4), Idle: r.IntN(2) == 0}
	}
	for range 500 {
		a, b, c := gen(), gen(), gen()
		if a.Join(b) != b.Join(a) || a.Join(b).Join(c) != a.Join(b.Join(c)) || a.Join(a) != a {
			t.Fatalf("join laws fail on %v %v %v", a, b, c)
		}
	}
	if got := (TaskMark{WatermarkMs: 5}).Join(TaskMark{WatermarkMs: 5, Idle: true}); !got.Idle {
		t.Fatalf("equal watermarks: %v, want the idle mark", got)
	}
}

func TestRecordMarksAndAbsorb(t *testing.T) {
	m := func(p int32, wm int64, idle bool) TaskMark {
		return TaskMark{TaskRef: TaskRef{0, p}, WatermarkMs: wm, Idle: idle}
	}
	r := Record{Sink: "out", Offsets: []int64{3}}
	r = r.SetMark(m(2, 10, false)).SetMark(m(0, 5, false)).SetMark(m(1, 7, true))
	r = r.SetMark(m(2, 10, true)) // replaces, even with the same watermark
	if want := []TaskMark{m(0, 5, false), m(1, 7, true), m(2, 10, true)}; !reflect.DeepEqual(r.Tasks, want) {
		t.Fatalf("marks %v, want %v", r.Tasks, want)
	}
	if got, ok := r.Mark(TaskRef{0, 1}); !ok || got != m(1, 7, true) {
		t.Fatalf("Mark = %v %v", got, ok)
	}
	o := Record{Sink: "out", Offsets: []int64{1, 9}, Tasks: []TaskMark{m(0, 2, false), m(3, 4, false)}}
	a := r.Absorb(o)
	if want := []int64{3, 9}; !reflect.DeepEqual(a.Offsets, want) {
		t.Fatalf("absorbed offsets %v, want %v", a.Offsets, want)
	}
	if want := []TaskMark{m(0, 5, false), m(1, 7, true), m(2, 10, true), m(3, 4, false)}; !reflect.DeepEqual(a.Tasks, want) {
		t.Fatalf("absorbed marks %v, want %v", a.Tasks, want)
	}
	if len(r.Tasks) != 3 || len(r.Offsets) != 1 {
		t.Fatal("Absorb modified its receiver")
	}
}
