package processor

import (
	"bytes"
	"testing"
)

// An output's key and value are copied into one buffer; a null key or
// value and an empty one stay different, and appending to the copied key
// must not overwrite the value behind it.
func TestCloneKeyValueKeepsNullEmptyAndBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		k, v []byte
	}{
		{"both", []byte("key"), []byte("value")},
		{"null key", nil, []byte("value")},
		{"null value", []byte("key"), nil},
		{"both null", nil, nil},
		{"empty key", []byte{}, []byte("value")},
		{"empty value", []byte("key"), []byte{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, v := cloneKeyValue(c.k, c.v)
			if (k == nil) != (c.k == nil) || (v == nil) != (c.v == nil) {
				t.Fatalf("nil-ness changed: key %v→%v, value %v→%v", c.k == nil, k == nil, c.v == nil, v == nil)
			}
			if !bytes.Equal(k, c.k) || !bytes.Equal(v, c.v) {
				t.Fatalf("copied %q/%q, want %q/%q", k, v, c.k, c.v)
			}
			if len(c.k) > 0 {
				c.k[0] ^= 0xff
				if k[0] == c.k[0] {
					t.Fatal("the key shares the caller's buffer")
				}
			}
			if k != nil && v != nil {
				_ = append(k, 'X')
				if !bytes.Equal(v, c.v) {
					t.Fatalf("appending to the key changed the value to %q", v)
				}
			}
		})
	}
}
