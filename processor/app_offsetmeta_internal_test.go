package processor

import (
	"fmt"
	"testing"
)

func TestClockMetadataRoundTrip(t *testing.T) {
	md := encodeClocks(1234, map[string]int64{"per-window": 99, "odd name&=?": 7})
	if len(md) > 4096 {
		t.Fatalf("metadata %d bytes: over the broker's default offset.metadata.max.bytes", len(md))
	}
	st, ops, ok := decodeClocks(md)
	if !ok || st != 1234 || fmt.Sprint(ops) != fmt.Sprint(map[string]int64{"odd name&=?": 7, "per-window": 99}) {
		t.Fatalf("decode(%q) = %d %v %v", md, st, ops, ok)
	}
	for _, other := range []string{"", "someone else's metadata", "tidemark/1?%zz"} {
		if st, ops, ok := decodeClocks(other); ok || st != -1 || ops != nil {
			t.Errorf("decode(%q) = %d %v %v, want no clocks", other, st, ops, ok)
		}
	}
}
