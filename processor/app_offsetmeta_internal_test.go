package processor

import (
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func TestOffsetMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	in := offsetMeta{inputTime: 1234, ops: map[string]int64{"per-window": 99, "odd name&=?": 7},
		logs: map[string]int64{"count-store": 15523, "a.b": 3}}
	md := in.encode()
	if len(md) > 4096 {
		t.Fatalf("metadata %d bytes: over the broker's default offset.metadata.max.bytes", len(md))
	}
	got, ok := decodeOffsetMeta(md)
	if !ok || got.inputTime != 1234 || fmt.Sprint(got.ops) != fmt.Sprint(in.ops) || fmt.Sprint(got.logs) != fmt.Sprint(in.logs) {
		t.Fatalf("decode(%q) = %+v %v", md, got, ok)
	}
	for _, other := range []string{"", "someone else's metadata", "tidemark/1?%zz"} {
		if m, ok := decodeOffsetMeta(other); ok || m.inputTime != -1 || m.ops != nil || m.logs != nil {
			t.Errorf("decode(%q) = %+v %v, want nothing", other, m, ok)
		}
	}
}

// An older version wrote only clocks: such metadata resumes the clocks and
// asks no changelog position.
func TestOffsetMetadataOfAnOlderVersionHasNoPositions(t *testing.T) {
	t.Parallel()
	m, ok := decodeOffsetMeta("tidemark/1?c.w=5&st=10")
	if !ok || m.inputTime != 10 || m.ops["w"] != 5 || len(m.logs) != 0 {
		t.Fatalf("decode = %+v %v", m, ok)
	}
}

// A task with many windowed operators of descriptive names: each has a
// clock and two logged stores (its windows, its -EMIT-CURSOR). The plain
// form of its metadata is over the broker's default
// offset.metadata.max.bytes (4096), which refused every commit; the
// encoded form must fit, and decode to the same clocks and positions.
func TestOffsetMetadataOfManyOperatorsFitsTheBrokerLimit(t *testing.T) {
	t.Parallel()
	in := offsetMeta{inputTime: 1765019000123, ops: map[string]int64{}, logs: map[string]int64{}}
	for i := range 60 {
		name := fmt.Sprintf("velocity-per-user-and-merchant-over-five-minutes-%02d", i)
		in.ops[name] = 1765019000000 + int64(i)*7919
		in.logs[name] = 1_000_000 + int64(i)*104729
		in.logs[name+"-EMIT-CURSOR"] = 2_000_000 + int64(i)*1299709
	}
	md := in.encode()
	if len(md) > 4096 {
		t.Fatalf("metadata of %d operators is %d bytes: over the broker's default offset.metadata.max.bytes (4096)", len(in.ops), len(md))
	}
	t.Logf("metadata of %d operators: %d bytes", len(in.ops), len(md))
	got, ok := decodeOffsetMeta(md)
	if !ok || got.inputTime != in.inputTime || fmt.Sprint(got.ops) != fmt.Sprint(in.ops) || fmt.Sprint(got.logs) != fmt.Sprint(in.logs) {
		t.Fatalf("decode of %d bytes = %+v %v, want %+v", len(md), got, ok, in)
	}
	for _, bad := range []string{"tidemark/1z?", "tidemark/1z?!!", "tidemark/1z?AAAA"} {
		if m, ok := decodeOffsetMeta(bad); ok || m.inputTime != -1 {
			t.Errorf("decode(%q) = %+v %v, want nothing", bad, m, ok)
		}
	}
}

// The positions an older topology committed for stores this one no longer
// has (a removed or renamed operator's) were carried into every later
// commit for good, so each upgrade grew the offset metadata toward the
// broker's limit. A commit keeps only its own stores' positions.
func TestCommitMetadataDropsPositionsOfStoresTheTopologyNoLongerHas(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).GroupByKey().Count(topology.Named("counts"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	lt := &liveTask{app: "app", task: newTestTask(t, topo, 0),
		resume: resumePoint{logs: map[string]int64{"counts": 7, "in-COUNT-1-STORE": 42}}}
	rp, md := lt.nextResume(nil)
	if len(rp.logs) != 1 || rp.logs["counts"] != 7 {
		t.Errorf("resume point logs %v, want only counts at 7", rp.logs)
	}
	enc, ok := md["in"][0]
	if !ok {
		t.Fatalf("no metadata for in/0: %v", md)
	}
	m, ok := decodeOffsetMeta(enc)
	if !ok || len(m.logs) != 1 || m.logs["counts"] != 7 {
		t.Errorf("committed positions %v (from %q), want only counts at 7", m.logs, enc)
	}
}
