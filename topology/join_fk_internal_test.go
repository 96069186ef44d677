package topology

import (
	"bytes"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

// The foreign-key join's result rows keep the byte layout they had before
// the result store became a tsStore: existing changelogs restore as they
// were written. timestamp (8 bytes, big-endian), found flag, uvarint length
// of the left value, the left value, the right value when found.
func TestFKJoinedRowLayout(t *testing.T) {
	js := fkJoinedSerde[string, string]{vs: serde.String(), os: serde.String()}
	for _, c := range []struct {
		j    fkJoined[string, string]
		want []byte
	}{
		{fkJoined[string, string]{left: "ab", right: "xyz", found: true},
			[]byte{0, 0, 0, 0, 0, 0, 0x01, 0x02, 1, 2, 'a', 'b', 'x', 'y', 'z'}},
		{fkJoined[string, string]{left: "ab", right: "ignored"},
			[]byte{0, 0, 0, 0, 0, 0, 0x01, 0x02, 0, 2, 'a', 'b'}},
	} {
		got, err := appendValueTS(nil, js, 0x0102, c.j)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%+v encodes to %v, want %v", c.j, got, c.want)
		}
		ts, vb, err := DecodeTimestamped(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := js.Decode(vb)
		want := c.j
		if !want.found {
			want.right = ""
		}
		if err != nil || ts != 0x0102 || back != want {
			t.Errorf("%v decodes to %+v @%d (%v), want %+v", got, back, ts, err, want)
		}
	}
	for _, bad := range [][]byte{{1}, {1, 5, 'a'}} {
		if _, err := js.Decode(bad); err == nil {
			t.Errorf("Decode(%v): no error for a corrupt row", bad)
		}
	}
}
