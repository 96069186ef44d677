package changelog

import (
	"bytes"
	"testing"
)

func TestRangePrefix(t *testing.T) {
	base := []byte{'s', 1}
	k := func(b ...byte) []byte { return append(append([]byte(nil), base...), b...) }
	for _, c := range []struct {
		name       string
		lo, hi     []byte
		wantPrefix []byte
	}{
		{"unbounded", k('T', 0, 5), nil, base},
		{"to the end of a region", k('T', 0, 5), k('U'), k('T')},
		{"within a region", k('T', 0, 5), k('T', 0, 9), k('T', 0)},
		{"equal bounds share all of lo", k('T', 0, 5), k('T', 0, 6), k('T', 0, 5)},
		{"across regions", k('T', 9), k('V'), base},
		{"lo is the base", base, k('T'), base},
		{"a 0xff byte stays in the prefix", k('T', 0xff, 3), k('U'), k('T', 0xff)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rangePrefix(base, c.lo, c.hi)
			if !bytes.Equal(got, c.wantPrefix) {
				t.Fatalf("rangePrefix(%x, %x) = %x, want %x", c.lo, c.hi, got, c.wantPrefix)
			}
			// Every key in [lo, hi) has the prefix: the last key before hi
			// and lo itself.
			if !bytes.HasPrefix(c.lo, got) {
				t.Fatalf("lo %x lacks prefix %x", c.lo, got)
			}
			if c.hi != nil {
				if bytes.Compare(prefixEnd(got), c.hi) < 0 {
					t.Fatalf("keys below hi %x lie past prefix %x", c.hi, got)
				}
			}
		})
	}
}
