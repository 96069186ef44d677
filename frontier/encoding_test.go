package frontier

import (
	"errors"
	"reflect"
	"testing"
)

func TestRecordEncoding(t *testing.T) {
	r := Record{
		Sink:    "orders-availability",
		Offsets: []int64{120, NoOffset, 0},
		Feeds:   []Feed{{SubTopology: 0, Tasks: 3}, {SubTopology: 4, Tasks: 12}},
		Tasks: []TaskMark{
			{TaskRef: TaskRef{0, 0}, WatermarkMs: 1_777_000_000_000},
			{TaskRef: TaskRef{0, 2}, WatermarkMs: NoWatermark, Idle: true},
			{TaskRef: TaskRef{4, 11}, WatermarkMs: -1},
		},
	}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != recordVersion {
		t.Fatalf("version byte %d, want %d", b[0], recordVersion)
	}
	var got Record
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	for n := range b {
		if err := got.UnmarshalBinary(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("value truncated to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] = 0x80 // unknown flag bits
	if err := got.UnmarshalBinary(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown flags: %v, want ErrCorrupt", err)
	}
	if _, err := (Record{Sink: "s", Feeds: []Feed{{SubTopology: 0, Tasks: 0}}}).MarshalBinary(); err == nil {
		t.Fatal("a feed without tasks encoded")
	}
}

// TestRecordReadsVersionOne: the values the topic held before per-task
// watermarks still decode, as offsets and legacy watermarks, and encode
// back as they were.
func TestRecordReadsVersionOne(t *testing.T) {
	f := NewFrontier("out", 2)
	f.Marks[0] = Mark{Offset: 17, WatermarkMs: 5000}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := Record{Sink: "out", Offsets: []int64{17, NoOffset}, Legacy: []int64{5000, NoWatermark}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("version-1 value decoded as %+v, want %+v", r, want)
	}
	again, err := r.MarshalBinary()
	if err != nil || !reflect.DeepEqual(again, b) {
		t.Fatalf("re-encoded %x (%v), want %x", again, err, b)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	r := Record{Sink: "s", Offsets: []int64{1, -1}, Feeds: []Feed{{1, 2}}, Tasks: []TaskMark{{TaskRef{1, 0}, 99, true}, {TaskRef{1, 1}, NoWatermark, false}}}
	b, _ := r.MarshalBinary()
	f.Add(b)
	v1, _ := NewFrontier("s", 2).MarshalBinary()
	f.Add(v1)
	f.Add([]byte{2, 0, 0, 0, 255, 255, 255, 255, 15})
	f.Add([]byte{2, 1, 's', 0, 1, 0, 255, 255, 255, 255, 7, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if err := r.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		re, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		var again Record
		if err := again.UnmarshalBinary(re); err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("re-decode: %+v (%v), want %+v", again, err, r)
		}
		// A view folds any decodable record without panicking.
		v := NewView()
		v.Put("k", r)
		v.Sink(r.Sink)
	})
}
