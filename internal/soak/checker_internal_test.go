package soak

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The checker's rules, on outputs fed by hand: no broker.

type out struct {
	key   string
	value string
}

func watch(t *testing.T, outs []out, dead []Coord) *Watcher {
	t.Helper()
	w := &Watcher{in: "in", out: "out", dlq: "dlq", start: time.Now(),
		next: map[string]map[int32]int64{"out": {}, "dlq": {}}, keys: map[string]*keyState{},
		counts: map[string]int{}, dead: map[Coord]int{}}
	offsets := map[string]int64{}
	for _, o := range outs {
		offsets[o.key]++
		w.onOutput(&kgo.Record{Topic: "out", Key: []byte(o.key), Value: []byte(o.value), Offset: offsets[o.key]})
	}
	for i, c := range dead {
		w.onDeadLetter(&kgo.Record{Topic: "dlq", Offset: int64(i), Headers: []kgo.RecordHeader{
			{Key: hdrSourceTopic, Value: []byte("in")},
			{Key: hdrSourcePartition, Value: []byte(strconv.Itoa(int(c.Partition)))},
			{Key: hdrSourceOffset, Value: []byte(strconv.FormatInt(c.Offset, 10))},
		}})
	}
	return w
}

func seq(key string, values ...int) []out {
	var o []out
	for _, v := range values {
		o = append(o, out{key, strconv.Itoa(v)})
	}
	return o
}

func TestCheckerRules(t *testing.T) {
	poison := map[Coord]bool{{0, 7}: true, {1, 3}: true}
	valid := map[Coord]bool{{0, 1}: true}
	in := InputLog{PerKey: map[string]int{"a": 3, "b": 2}, Poison: poison, Valid: valid}
	all := []Coord{{0, 7}, {1, 3}}
	for _, tc := range []struct {
		name  string
		outs  []out
		dead  []Coord
		check func(Report) bool
	}{
		{"exact sequences and every poison pill once are clean",
			append(seq("a", 1, 2, 3), seq("b", 1, 2)...), all,
			func(r Report) bool { return r.Clean() && r.Outputs == 5 && r.PoisonDeadLettered == 2 }},
		{"a count that goes back is a decrease and the replay overshoots",
			append(seq("a", 1, 2, 3, 2, 3, 4), seq("b", 1, 2)...), all,
			func(r Report) bool { return r.Decreases == 1 && r.Duplicated == 1 && r.KeysOver == 1 && !r.Clean() }},
		{"the same count twice is a repeat, even when the final count is right",
			append(seq("a", 1, 2, 2, 3), seq("b", 1, 2)...), all,
			func(r Report) bool { return r.Repeats == 1 && r.Duplicated == 0 && !r.Clean() }},
		{"a skipped count is a gap",
			append(seq("a", 1, 3), seq("b", 1, 2)...), all,
			func(r Report) bool { return r.Gaps == 1 && r.Lost == 0 && !r.Clean() }},
		{"a final count short of the input is lost",
			append(seq("a", 1, 2), seq("b", 1)...), all,
			func(r Report) bool { return r.Lost == 2 && r.KeysShort == 2 && !r.Clean() }},
		{"a key never produced is counted as duplicated",
			append(append(seq("a", 1, 2, 3), seq("b", 1, 2)...), seq("z", 1)...), all,
			func(r Report) bool { return r.Unexpected == 1 && r.Duplicated == 1 && !r.Clean() }},
		{"an output that is not a decimal count is malformed",
			append(append(seq("a", 1, 2, 3), seq("b", 1, 2)...), out{"a", "\x00\x00"}), all,
			func(r Report) bool { return r.Malformed == 1 && !r.Clean() }},
		{"a poison pill missing from the dead-letter topic",
			append(seq("a", 1, 2, 3), seq("b", 1, 2)...), []Coord{{0, 7}},
			func(r Report) bool { return r.PoisonMissing == 1 && !r.Clean() }},
		{"a poison pill dead-lettered twice",
			append(seq("a", 1, 2, 3), seq("b", 1, 2)...), []Coord{{0, 7}, {1, 3}, {1, 3}},
			func(r Report) bool { return r.PoisonDuplicated == 1 && !r.Clean() }},
		{"a valid record in the dead-letter topic",
			append(seq("a", 1, 2, 3), seq("b", 1, 2)...), []Coord{{0, 7}, {1, 3}, {0, 1}},
			func(r Report) bool { return r.DeadLetterWrong == 1 && !r.Clean() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := watch(t, tc.outs, tc.dead).Report(in)
			if !tc.check(r) {
				t.Fatalf("report %+v", r)
			}
		})
	}
}

func TestCompareInputSeparatesBrokerLossFromAmbiguousProduces(t *testing.T) {
	p := Produced{PerKey: map[string]int{"a": 3, "b": 1}, Poison: []Coord{{0, 5}}}
	log := InputLog{PerKey: map[string]int{"a": 2, "b": 2}, Poison: map[Coord]bool{{0, 5}: true, {1, 1}: true}}
	missing, unacked := compareInput(p, log)
	if missing != 1 || unacked != 2 {
		t.Fatalf("acked but missing %d (want 1), in the log but unacknowledged %d (want 2)", missing, unacked)
	}
}

func TestAheadOfInputPointsAtTheFirstRecordCountedTwice(t *testing.T) {
	start := time.UnixMilli(0)
	times := []int64{1000, 2000, 3000}
	clean := []output{{1, 1000, 0, 0}, {2, 2000, 0, 1}, {3, 3000, 0, 2}}
	if got := aheadOfInput(clean, times, start); got != "" {
		t.Fatalf("clean history flagged: %s", got)
	}
	// Input #2 counted twice: the third count carries input #2's stamp.
	twice := []output{{1, 1000, 0, 0}, {2, 2000, 0, 1}, {3, 2000, 0, 2}, {4, 3000, 0, 3}}
	if got := aheadOfInput(twice, times, start); !strings.Contains(got, "3 at 0@2 stamped +2s, but input #3 of the key is stamped +3s") {
		t.Fatalf("got %q", got)
	}
}
