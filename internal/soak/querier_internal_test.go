package soak

import (
	"strings"
	"testing"
)

// TestCheckQueriesHoldsAnswersToTheirPosition: an answer must equal the
// key's valid input records below its position in its partition; one
// ahead (uncommitted state), behind, without a position or in the wrong
// partition is wrong.
func TestCheckQueriesHoldsAnswersToTheirPosition(t *testing.T) {
	log := InputLog{Offsets: map[string][]Coord{
		"a": {{1, 3}, {1, 7}, {1, 9}},
		"b": {{0, 4}},
	}}
	right := []QueryAnswer{
		{Key: "a", Found: true, Value: 2, Partition: 1, Position: 8},
		{Key: "a", Found: true, Value: 3, Partition: 1, Position: 10},
		{Key: "a", Found: false, Partition: 1, Position: 3}, // offset 3 not reflected yet
		{Key: "b", Found: true, Value: 1, Partition: 0, Position: 5},
		{Key: "c", Found: false, Partition: 2, Position: 100}, // never produced
		{Key: "b", Found: false, Partition: 0, Position: 0},   // no position: reflects no input
	}
	if rp := CheckQueries(right, nil, log); rp.Wrong != 0 || rp.Checked != len(right) || rp.Found != 3 {
		t.Fatalf("consistent answers: %+v", rp)
	}
	wrong := []QueryAnswer{
		{Key: "a", Found: true, Value: 3, Partition: 1, Position: 8},  // ahead of its position
		{Key: "a", Found: true, Value: 1, Partition: 1, Position: 10}, // behind it
		{Key: "a", Found: false, Partition: 1, Position: 4},           // lost a record
		{Key: "a", Found: true, Value: 1, Partition: 1, Position: 0},  // found, at no position
		{Key: "b", Found: true, Value: 1, Partition: 3, Position: 5},  // wrong partition
	}
	rp := CheckQueries(wrong, nil, log)
	if rp.Wrong != len(wrong) {
		t.Fatalf("wrong answers: %d of %d flagged: %v", rp.Wrong, len(wrong), rp.Examples)
	}
	if !strings.Contains(rp.Examples[0], "answered 3, the input below that position holds 2") {
		t.Fatalf("example does not say what was wrong: %q", rp.Examples[0])
	}
}

// TestDecodeAnswerReadsTheServiceAnswer decodes answers shaped as the
// service's GET /stores/{store}/keys/{key} writes them.
func TestDecodeAnswerReadsTheServiceAnswer(t *testing.T) {
	found := `{"key":"k000001","value":"AAAAAAAAACo=","encoding":"base64","partition":2,"position":{"in":{"2":1234}},"changelog":{"cl":{"2":99}}}`
	a, err := decodeAnswer([]byte(found), true, "in")
	if err != nil || !a.Found || a.Value != 42 || a.Partition != 2 || a.Position != 1234 {
		t.Fatalf("found: %+v, %v", a, err)
	}
	missing := `{"error":"key not found","partition":0,"position":{"in":{"0":7}},"changelog":{}}`
	if a, err = decodeAnswer([]byte(missing), false, "in"); err != nil || a.Found || a.Position != 7 {
		t.Fatalf("not found: %+v, %v", a, err)
	}
	if a, err = decodeAnswer([]byte(`{"partition":0,"position":{}}`), false, "in"); err != nil || a.Position != 0 {
		t.Fatalf("no position: %+v, %v", a, err)
	}
	if _, err = decodeAnswer([]byte(`{"value":"3","encoding":"utf8","partition":0}`), true, "in"); err == nil {
		t.Fatal("a value that is not 8 bytes decoded")
	}
}

// TestCheckFrontiersHoldsTheWatermarkToTheOutputs: a frontier answer with
// watermark W must have every count stamped at or before W committed below
// the offsets it names.
func TestCheckFrontiersHoldsTheWatermarkToTheOutputs(t *testing.T) {
	log := InputLog{Times: map[string][]int64{
		"a": {100, 200, 150, 300}, // counts stamped 100, 200, 200, 300
		"b": {250},
	}}
	outputs := map[string][]Coord{
		"a": {{0, 0}, {0, 1}, {0, 5}, {0, 9}},
		"b": {{1, 3}},
	}
	outputOf := func(key string, count int64) (Coord, bool) {
		out := outputs[key]
		if count < 1 || int(count) > len(out) {
			return Coord{}, false
		}
		return out[count-1], true
	}
	right := []FrontierAnswer{
		{Watermark: 99, Offsets: []int64{0, 0}},
		{Watermark: 200, Offsets: []int64{6, 0}}, // a's count 3 (stamped 200) at 5
		{Watermark: 260, Offsets: []int64{6, 4}},
		{Watermark: 300, Offsets: []int64{10, 4}},
	}
	var rp QueryReport
	rp.CheckFrontiers(right, log, outputOf)
	if rp.FrontierWrong != 0 || rp.Frontiers != len(right) || rp.FrontierCounts != 5 {
		t.Fatalf("consistent frontiers: %+v", rp)
	}
	wrong := []FrontierAnswer{
		{Watermark: 200, Offsets: []int64{5, 0}}, // a's count 3 at offset 5 is not below 5
		{Watermark: 260, Offsets: []int64{6, 3}}, // b's count 1 at 3
		{Watermark: 300, Offsets: []int64{10}},   // b's partition not named
	}
	rp = QueryReport{}
	rp.CheckFrontiers(wrong, log, outputOf)
	if rp.FrontierWrong != len(wrong) {
		t.Fatalf("wrong frontiers: %d of %d flagged: %v", rp.FrontierWrong, len(wrong), rp.Examples)
	}
	rp = QueryReport{}
	rp.CheckFrontiers([]FrontierAnswer{{Watermark: 400, Offsets: []int64{10, 4}}}, InputLog{Times: map[string][]int64{"c": {1}}}, outputOf)
	if rp.FrontierWrong != 1 || !strings.Contains(rp.Examples[0], "never output") {
		t.Fatalf("a count never output: %+v", rp)
	}
}
