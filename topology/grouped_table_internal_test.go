package topology

import (
	"errors"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

// A table delta survives the repartition topic: adds, subtractions and a
// row's change within its group (old and new value in one record), and a
// damaged record is a decode error, never a wrong delta.
func TestTableDeltaSerdeRoundTrips(t *testing.T) {
	s := tableDeltaSerde[string]{vs: serde.String()}
	for _, d := range []tableDelta[string]{
		{v: "new"},
		{v: "gone", sub: true},
		{v: "new", old: "old", replace: true},
		{v: "", old: "", replace: true},
	} {
		b, err := s.Encode([]byte("prefix"), d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Decode(b[len("prefix"):])
		if err != nil || got != d {
			t.Errorf("round trip of %+v: %+v, %v", d, got, err)
		}
	}
	replace, _ := s.Encode(nil, tableDelta[string]{v: "new", old: "old", replace: true})
	for name, b := range map[string][]byte{
		"empty":            {},
		"unknown flag":     {7, 'x'},
		"old value cut":    replace[:3],
		"length overflows": {deltaReplace, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := s.Decode(b); !errors.Is(err, serde.ErrDecode) {
			t.Errorf("%s: err %v, want serde.ErrDecode", name, err)
		}
	}
}
