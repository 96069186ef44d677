package processor

import (
	"fmt"
	"testing"
)

func TestOffsetMetadataRoundTrip(t *testing.T) {
	in := offsetMeta{inputTime: 1234, ops: map[string]int64{"per-window": 99, "odd name&=?": 7},
		logs: map[string]int64{"count-store": 15523, "a.b": 3}}
	md := in.encode()
	if len(md) > 4096 {
		t.Fatalf("metadata %d bytes: over the broker's default offset.metadata.max.bytes", len(md))
	}
	got, ok := decodeOffsetMeta(md)
	if !ok || got.inputTime != 1234 || fmt.Sprint(got.ops) != fmt.Sprint(in.ops) || fmt.Sprint(got.logs) != fmt.Sprint(in.logs) {
		t.Fatalf("decode(%q) = %+v %v", md, got, ok)
	}
	for _, other := range []string{"", "someone else's metadata", "tidemark/1?%zz"} {
		if m, ok := decodeOffsetMeta(other); ok || m.inputTime != -1 || m.ops != nil || m.logs != nil {
			t.Errorf("decode(%q) = %+v %v, want nothing", other, m, ok)
		}
	}
}

// An older version wrote only clocks: such metadata resumes the clocks and
// asks no changelog position.
func TestOffsetMetadataOfAnOlderVersionHasNoPositions(t *testing.T) {
	m, ok := decodeOffsetMeta("tidemark/1?c.w=5&st=10")
	if !ok || m.inputTime != 10 || m.ops["w"] != 5 || len(m.logs) != 0 {
		t.Fatalf("decode = %+v %v", m, ok)
	}
}
