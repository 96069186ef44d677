package soak

import (
	"encoding/binary"
	"strings"
	"testing"
)

// clCount is a changelog record of key's count, as countsvc's store
// writes it: 'k' + key; the timestamp, then the count, big-endian.
func clCount(off int64, key string, n int64) changelogRecord {
	v := binary.BigEndian.AppendUint64(nil, uint64(1_700_000_000_000))
	return changelogRecord{Offset: off, Key: append([]byte{'k'}, key...), Value: binary.BigEndian.AppendUint64(v, uint64(n))}
}

// clPosition is a position record: the task's input topic/partition at
// offset at.
func clPosition(off int64, topic string, partition int32, at int64) changelogRecord {
	v := binary.AppendUvarint(nil, 1)
	v = binary.AppendUvarint(v, uint64(len(topic)))
	v = append(v, topic...)
	v = binary.BigEndian.AppendUint32(v, uint32(partition))
	return changelogRecord{Offset: off, Key: []byte{'p'}, Value: binary.BigEndian.AppendUint64(v, uint64(at))}
}

// TestCheckStateHoldsTheChangelogToTheInput: partition 0's input holds
// a@0, b@1, poison@2, a@3. A changelog that commits a, then b and the
// poison pill, then a's second record, each with its position, is right;
// each way of getting the state wrong is flagged and says what it saw.
func TestCheckStateHoldsTheChangelogToTheInput(t *testing.T) {
	in := InputLog{
		Offsets: map[string][]Coord{"a": {{0, 0}, {0, 3}}, "b": {{0, 1}}},
		Poison:  map[Coord]bool{{0, 2}: true},
	}
	right := []changelogRecord{
		clCount(0, "a", 1), clPosition(1, "in", 0, 1),
		clCount(3, "b", 1), clPosition(4, "in", 0, 3), // the poison pill moves the position only
		clCount(6, "a", 2), clPosition(7, "in", 0, 4),
	}
	if rp := CheckState(map[int32][]changelogRecord{0: right}, in, "in", map[int32]int64{0: 4}); !rp.Clean() || rp.Positions != 3 || rp.Records != 3 {
		t.Fatalf("a right changelog: %s %v", rp, rp.Examples)
	}
	// The group's offset committed with the last position must be it.
	for _, committed := range []map[int32]int64{{0: 3}, {0: 5}, {}} {
		if rp := CheckState(map[int32][]changelogRecord{0: right}, in, "in", committed); rp.OffsetsDiffer != 1 {
			t.Fatalf("committed offsets %v: %s %v", committed, rp, rp.Examples)
		}
	}
	for _, tc := range []struct {
		name string
		recs []changelogRecord
		want string // in the first example
	}{
		{"counted twice", []changelogRecord{
			clCount(0, "a", 1), clPosition(1, "in", 0, 1),
			clCount(3, "a", 2), clCount(4, "b", 1), clPosition(5, "in", 0, 3),
			clCount(6, "a", 3), clPosition(7, "in", 0, 4),
		}, "key a counts 2, the input below position 3 holds 1"},
		{"a record skipped", []changelogRecord{
			clCount(0, "a", 1), clPosition(1, "in", 0, 3),
			clCount(6, "a", 2), clPosition(7, "in", 0, 4),
		}, "key b counts 0, the input below position 3 holds 1"},
		{"state ahead of its position", []changelogRecord{
			clCount(0, "a", 1), clCount(1, "b", 1), clPosition(2, "in", 0, 1),
			clCount(3, "a", 2), clPosition(4, "in", 0, 4),
		}, "key b counts 1, the input below position 1 holds 0"},
		{"position moved back", []changelogRecord{
			clCount(0, "a", 1), clCount(1, "b", 1), clPosition(2, "in", 0, 3),
			clPosition(3, "in", 0, 1),
			clCount(4, "a", 2), clPosition(5, "in", 0, 4),
		}, "position 1 after position 3"},
		{"state past the last position", []changelogRecord{
			clCount(0, "a", 1), clCount(1, "b", 1), clPosition(2, "in", 0, 3),
			clCount(3, "a", 2),
		}, "state records after its last position 3"},
		{"short of the input", []changelogRecord{
			clCount(0, "a", 1), clCount(1, "b", 1), clPosition(2, "in", 0, 3),
		}, "last position 3, the input partition ends at 4"},
		{"a tombstone", []changelogRecord{
			clCount(0, "a", 1), clCount(1, "b", 1), clPosition(2, "in", 0, 3),
			{Offset: 3, Key: []byte("ka")}, clPosition(4, "in", 0, 4),
		}, "key a counts 0, the input below position 4 holds 2"},
		{"a malformed value", []changelogRecord{
			{Offset: 0, Key: []byte("ka"), Value: []byte{1}},
		}, "value of 1 bytes, want 16"},
		{"another task's position", []changelogRecord{
			clCount(0, "a", 1), clPosition(1, "other", 0, 1),
		}, "key a counts 1, the input below position 0 holds 0"},
		{"a position that does not decode", []changelogRecord{
			{Offset: 0, Key: []byte{'p'}, Value: []byte{1, 2}},
		}, "undecodable position record of 2 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := CheckState(map[int32][]changelogRecord{0: tc.recs}, in, "in", nil)
			if rp.Clean() || len(rp.Examples) == 0 || !strings.Contains(rp.Examples[0], tc.want) {
				t.Fatalf("not flagged as %q: %s %v", tc.want, rp, rp.Examples)
			}
		})
	}
	// A partition with input and no changelog never committed its state.
	if rp := CheckState(map[int32][]changelogRecord{}, in, "in", nil); rp.Behind != 1 {
		t.Fatalf("an empty changelog: %s %v", rp, rp.Examples)
	}
}
