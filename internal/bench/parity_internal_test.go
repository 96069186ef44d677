package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Final values: the last update of each key wins, whatever came before, so
// Kafka Streams' cached (fewer) updates compare equal to tidemark's every
// update; a missing key and a different final value are mismatches.
func TestParityCompareFinalValues(t *testing.T) {
	tm := []outRecord{{"a", "1"}, {"a", "2"}, {"a", "3"}, {"b", "1"}, {"c", "5"}, {"d", "1"}}
	ks := []outRecord{{"a", "3"}, {"b", "1"}, {"c", "4"}, {"e", "2"}}
	var w ParityWorkload
	compareEntries(&w, finalValues(tm), finalValues(ks))
	if w.Tidemark.Entries != 4 || w.Streams.Entries != 4 {
		t.Fatalf("entries %d / %d, want 4 / 4", w.Tidemark.Entries, w.Streams.Entries)
	}
	if w.Tidemark.Total != 3+1+5+1 || w.Streams.Total != 3+1+4+2 {
		t.Fatalf("totals %d / %d", w.Tidemark.Total, w.Streams.Total)
	}
	want := []ParityMismatch{{"c", "5", "4"}, {"d", "1", "-"}, {"e", "-", "2"}}
	if w.Mismatches != 3 || !slices.Equal(w.Examples, want) {
		t.Fatalf("mismatches %d %v, want %v", w.Mismatches, w.Examples, want)
	}
	var same ParityWorkload
	compareEntries(&same, finalValues(tm[2:]), finalValues(tm))
	if same.Mismatches != 0 {
		t.Fatalf("the same final values differ: %v", same.Examples)
	}
}

// The join compares multisets: a pair emitted twice on one side and once
// on the other is a mismatch, the order of pairs is not.
func TestParityCompareJoinMultiset(t *testing.T) {
	tm := []outRecord{{"k", "L1|R1"}, {"k", "L1|R2"}, {"k", "L1|R2"}, {"j", "L3|R3"}}
	ks := []outRecord{{"k", "L1|R2"}, {"j", "L3|R3"}, {"k", "L1|R1"}}
	var w ParityWorkload
	compareEntries(&w, pairCounts(tm), pairCounts(ks))
	if w.Mismatches != 1 || w.Examples[0] != (ParityMismatch{"k → L1|R2", "2", "1"}) {
		t.Fatalf("mismatches %d %v", w.Mismatches, w.Examples)
	}
	var same ParityWorkload
	compareEntries(&same, pairCounts(tm[1:]), pairCounts([]outRecord{tm[2], tm[3], tm[1]}))
	if same.Mismatches != 0 {
		t.Fatalf("reordered pairs differ: %v", same.Examples)
	}
	var md strings.Builder
	(&ParityReport{Workloads: []ParityWorkload{w}}).Markdown(&md)
	if !strings.Contains(md.String(), `| k → L1\|R2 | 2 | 1 |`) {
		t.Fatalf("markdown lacks the mismatch:\n%s", md.String())
	}
}

// The input is the seed's: the same records every time, with late,
// out-of-order and equal timestamps, hot and cold keys, and for the join
// both inputs.
func TestParityInputShape(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	s := parityShape{Records: 20000, Keys: 200, Base: parityBase(time.Now()), Step: 10, Late: 2500, LateShare: 0.05, TwoInputs: true}
	a, b := parityInput(seed, s), parityInput(seed, s)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different input")
	}
	var late, behind, equal, second int
	keys := map[string]int{}
	top := int64(0)
	for i, r := range a {
		switch {
		case r.Ts < top-s.Late:
			late++
		case r.Ts < top:
			behind++
		}
		if i > 0 && r.Ts == a[i-1].Ts {
			equal++
		}
		if r.Second {
			second++
		}
		keys[r.Key]++
		top = max(top, r.Ts)
	}
	counts := make([]int, 0, len(keys))
	for _, n := range keys {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	hot, cold := counts[len(counts)-1], counts[0]
	t.Logf("late %d, out of order %d, equal to the previous %d, second input %d, keys %d (hottest %d, coldest %d)", late, behind, equal, second, len(keys), hot, cold)
	if late < 500 || behind < 1000 || equal < 1000 || second < 8000 || second > 12000 || hot < 20*cold {
		t.Fatal("the input lacks a case parity is meant to cover")
	}
}
