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

// Subscriptions carry the partition to answer to; those an older version
// left in the subscription topic (version 1, without it) still decode, to
// be answered on the key's default partition.
func TestFKSubscriptionCarriesPartition(t *testing.T) {
	ss := fkSubscriptionSerde[string]{ks: serde.String()}
	in := fkSubscription[string]{instr: fkSubscribe, hash: fkHashOf([]byte("v")), pk: "line-1", partition: 3}
	b, err := ss.Encode(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ss.Decode(b); err != nil || back != in {
		t.Errorf("Decode(Encode(%+v)) = %+v, %v", in, back, err)
	}
	old := append(append([]byte{1, byte(fkUnsubscribe)}, in.hash[:]...), "line-1"...)
	want := fkSubscription[string]{instr: fkUnsubscribe, hash: in.hash, pk: "line-1", partition: -1}
	if back, err := ss.Decode(old); err != nil || back != want {
		t.Errorf("version 1 subscription decodes to %+v, %v; want %+v", back, err, want)
	}
	for _, bad := range [][]byte{{2, byte(fkSubscribe)}, append([]byte{2, byte(fkSubscribe)}, in.hash[:]...), {3, 1}} {
		if _, err := ss.Decode(bad); err == nil {
			t.Errorf("Decode(%v): no error", bad)
		}
	}
	part := fkResponsePartition[string, string](serde.String())
	if p := part("t", "line-1", fkResponse[string]{partition: 3}, 4); p != 3 {
		t.Errorf("response with partition 3 goes to %d", p)
	}
	if p, want := part("t", "line-1", fkResponse[string]{partition: -1}, 4), DefaultPartition([]byte("line-1"), 4); p != want {
		t.Errorf("response without a partition goes to %d, want the default %d", p, want)
	}
}

// The response topic's partitioner only routes answers back to the task
// of their left row: it is no custom layout, so queries of the stores fed
// by it (the left table's, the result's) still find a key's partition.
func TestFKResponseTopicIsNotCustomPartitioned(t *testing.T) {
	b := NewBuilder("app")
	lines := b.Table("lines", serde.String(), serde.String(), Named("lines"))
	products := b.Table("products", serde.String(), serde.String(), Named("products"))
	lines.JoinOnForeignKey(products, func(_, v string) (string, bool) { return v, true },
		func(_, l, p string) string { return l + p }, Named("priced")).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.PartitionedTopics(); len(got) != 0 {
		t.Errorf("PartitionedTopics() = %v, want none", got)
	}
}
