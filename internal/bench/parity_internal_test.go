package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
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

// Every parity workload builds on tidemark's side, and the outputs read as
// the Kafka Streams peer writes them: a missing join side as "null" (Java's
// string concatenation of a null), a session as "<key>@<start>@<end>" with
// its final count.
func TestParityWorkloadOutputs(t *testing.T) {
	var o ParityOptions
	o.Brokers = []string{"unused:9092"}
	if err := o.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	run := func(w string, pipe func(d *tidemarktest.Driver) error) []outRecord {
		t.Helper()
		peer, window, join := parityWorkload(o, w)
		job := Job{AppID: "parity-" + w, Workload: peer, Input: "in", Output: "out", WindowSize: window, Grace: o.Grace}
		if join {
			job.Table = "in2"
		}
		topo, err := workloadTopology(job)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		d, err := tidemarktest.New(topo)
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		defer d.Close()
		if pipe == nil {
			return nil
		}
		if err := pipe(d); err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		kvs, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
		if err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		out := make([]outRecord, 0, len(kvs))
		for _, kv := range kvs {
			out = append(out, outRecord{kv.Key, kv.Value})
		}
		return out
	}
	for _, w := range ParityWorkloads {
		run(w, nil)
	}
	// ±1s, grace 500ms: L1 and R2 join, L3 and R4 find nothing, and the
	// record at 5000 closes their windows.
	joinInput := func(d *tidemarktest.Driver) error {
		l := tidemarktest.Input(d, "in", serde.String(), serde.String())
		r := tidemarktest.Input(d, "in2", serde.String(), serde.String())
		return errors.Join(l.Pipe("k", "L1", 1000), r.Pipe("k", "R2", 1500), l.Pipe("j", "L3", 1600),
			r.Pipe("i", "R4", 1700), l.Pipe("z", "L5", 5000))
	}
	wantJoin := map[string][]outRecord{
		"join":       {{"k", "L1|R2"}},
		"left-join":  {{"k", "L1|R2"}, {"j", "L3|null"}},
		"outer-join": {{"k", "L1|R2"}, {"j", "L3|null"}, {"i", "null|R4"}},
	}
	for w, want := range wantJoin {
		var tm, ks ParityWorkload
		compareEntries(&tm, pairCounts(run(w, joinInput)), pairCounts(want))
		if tm.Mismatches != 0 {
			t.Errorf("%s: %v", w, tm.Examples)
		}
		// A null-padded pair is its own entry: "L3|null" is not "L3|R9".
		compareEntries(&ks, pairCounts(want), pairCounts(append(slices.Clone(want[:len(want)-1]), outRecord{"j", "L3|R9"})))
		if w != "join" && ks.Mismatches != 2 {
			t.Errorf("%s: a null-padded pair against a joined one: %d mismatches %v, want 2", w, ks.Mismatches, ks.Examples)
		}
	}
	// Gap 500ms, grace 500ms: 1000, 1300 and 1700 make one session, 3000
	// another; the record at 9000 closes both.
	got := run("session", func(d *tidemarktest.Driver) error {
		in := tidemarktest.Input(d, "in", serde.String(), serde.String())
		return errors.Join(in.Pipe("k", "v", 1000), in.Pipe("k", "v", 1700), in.Pipe("k", "v", 1300),
			in.Pipe("k", "v", 3000), in.Pipe("z", "v", 9000))
	})
	var w ParityWorkload
	compareEntries(&w, finalValues(got), map[string]string{"k@1000@1700": "3", "k@3000@3000": "1"})
	if w.Mismatches != 0 {
		t.Errorf("session: %v", w.Examples)
	}
}

// The table aggregation's final counts are the input's: a category counts
// the rows whose last value (in offset order, whatever their timestamps)
// falls in it, deleted rows not at all, so every move between categories
// was subtracted. Run on tidemark over a parity input with out-of-order
// timestamps and deletes.
func TestParityTableAggMatchesInput(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	in := parityInput(seed, parityShape{Records: 20000, Keys: 200, Base: parityBase(time.Now()), Step: 10, Late: 2500, LateShare: 0.05, Tombstones: 0.05})
	topo, err := tableAggTopology(Job{AppID: "parity-table-agg", Input: "in", Output: "out"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := tidemarktest.Input(d, "in", serde.String(), serde.String())
	last := map[string]string{}
	deletes := 0
	for _, r := range in {
		if r.Tombstone {
			deletes++
			delete(last, r.Key)
			err = pipe.PipeTombstone(r.Key, r.Ts)
		} else {
			last[r.Key] = r.Value
			err = pipe.Pipe(r.Key, r.Value, r.Ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{}
	for _, v := range last {
		want[parityCategory(v)]++
	}
	kvs, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range kvs {
		got[kv.Key] = kv.Value
	}
	wantS := map[string]string{}
	for c, n := range want {
		wantS[c] = fmt.Sprint(n)
	}
	for c, v := range got { // categories emptied end at 0
		if _, ok := wantS[c]; !ok && v == "0" {
			wantS[c] = "0"
		}
	}
	var w ParityWorkload
	compareEntries(&w, got, wantS)
	t.Logf("%d records, %d deletes, %d rows left in %d categories", len(in), deletes, len(last), len(want))
	if deletes == 0 || w.Mismatches != 0 {
		t.Errorf("%d mismatches: %v", w.Mismatches, w.Examples)
	}
}

// An emptied group (final count 0) equals an absent one; any other count
// still differs.
func TestParityNonZero(t *testing.T) {
	var w ParityWorkload
	compareEntries(&w, nonZero(map[string]string{"a": "0", "b": "2", "c": "1"}), nonZero(map[string]string{"b": "2", "c": "0"}))
	if w.Mismatches != 1 || w.Examples[0] != (ParityMismatch{"c", "1", "-"}) {
		t.Fatalf("mismatches %d %v", w.Mismatches, w.Examples)
	}
}

// The stream-table join's input puts every table update before every
// stream record in event time, so each stream record joins its key's last
// table value ("null" for a deleted or never-written row); tidemark, run on
// it, pairs exactly so.
func TestParityTableJoinMatchesInput(t *testing.T) {
	const seed = 42
	t.Logf("seed %d", seed)
	s := parityShape{Records: 4000, Keys: 200, Base: parityBase(time.Now()), Step: 10, Late: 2500, LateShare: 0.05}
	in := parityTableJoinInput(seed, s)
	topo, err := workloadTopology(Job{AppID: "parity-table-join", Workload: "table-left-join", Input: "in", Table: "rows", Output: "out"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo, tidemarktest.WithDefaultPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	stream := tidemarktest.Input(d, "in", serde.String(), serde.String())
	table := tidemarktest.Input(d, "rows", serde.String(), serde.String())
	rows := map[string]string{}
	var want []outRecord
	deletes, lastTable := 0, int64(0)
	for _, r := range in {
		switch {
		case r.Second && r.Tombstone:
			deletes++
			delete(rows, r.Key)
			err = table.PipeTombstone(r.Key, r.Ts)
		case r.Second:
			rows[r.Key] = r.Value
			err = table.Pipe(r.Key, r.Value, r.Ts)
		default:
			if r.Ts <= lastTable {
				t.Fatalf("stream record %v not after the table's updates (last %d)", r, lastTable)
			}
			row, ok := rows[r.Key]
			want = append(want, outRecord{r.Key, r.Value + "|" + orNull(row, ok)})
			err = stream.Pipe(r.Key, r.Value, r.Ts)
		}
		if r.Second {
			lastTable = max(lastTable, r.Ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := tidemarktest.Output(d, "out", serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]outRecord, 0, len(kvs))
	nulls := 0
	for _, kv := range kvs {
		got = append(got, outRecord{kv.Key, kv.Value})
		if strings.HasSuffix(kv.Value, "|null") {
			nulls++
		}
	}
	var w ParityWorkload
	compareEntries(&w, pairCounts(got), pairCounts(want))
	t.Logf("%d stream records, %d table updates (%d deletes), %d unmatched", len(want), len(in)-len(want), deletes, nulls)
	if w.Mismatches != 0 || nulls == 0 || nulls == len(want) {
		t.Errorf("%d mismatches: %v", w.Mismatches, w.Examples)
	}
}
