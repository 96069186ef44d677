package dsl_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// dedupModel is an independent reference of Deduplicate as README
// describes it, for one task: stream time is the largest input timestamp;
// an id is forgotten once stream time passes first-seen + window; a record
// whose id is remembered within window of it is dropped; a record with an
// unknown id passes and is remembered unless it is late (ts < stream time
// − window).
type dedupModel struct {
	window int64
	st     int64
	first  map[string]int64
}

func (m *dedupModel) pass(id string, ts int64) bool {
	m.st = max(m.st, ts)
	for k, f := range m.first {
		if f < m.st-m.window {
			delete(m.first, k)
		}
	}
	f, found := m.first[id]
	if found && ts-f <= m.window && f-ts <= m.window {
		return false
	}
	if !found && ts >= m.st-m.window {
		m.first[id] = ts
	}
	return true
}

// TestDeduplicateAcrossRestart runs Deduplicate on the broker: half of the
// input, a stop, a new app with the same application id and a fresh state
// dir (the remembered ids come back from the changelog, stream time from
// the committed offsets), the other half. Every decision, before and after
// the restart, must be the model's: an id remembered before the restart
// still drops its duplicates, and a record late for the stream time
// reached before the restart passes unremembered after it.
func TestDeduplicateAcrossRestart(t *testing.T) {
	r := seeded(t)
	const window = 1000
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "app")
	build := func() *topology.Topology {
		b := topology.NewBuilder(appID)
		b.Stream(in, serde.String(), serde.String()).
			Deduplicate(func(id, _ string) string { return id }, window*time.Millisecond, topology.Named("dedup")).
			To(out)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	m := &dedupModel{window: window, st: -1, first: map[string]int64{}}
	clock := time.Now().Add(-time.Hour).UnixMilli()
	var want []string // passed values, in order
	seq := 0
	phase := func(n int) {
		t.Helper()
		var recs []record
		for range n {
			clock += int64(r.IntN(150))
			ts := clock - int64(r.IntN(1500)) // out of order, some late
			if r.IntN(10) == 0 {
				ts = clock - 2000 - int64(r.IntN(3000)) // late
			}
			id := "e" + strconv.Itoa(r.IntN(12))
			v := fmt.Sprintf("%s#%d", id, seq)
			seq++
			recs = append(recs, record{key: id, value: v, ts: ts})
			if m.pass(id, ts) {
				want = append(want, v)
			}
		}
		// A marker (a new id at stream time) passes last: once it is out,
		// every record before it was decided.
		marker := fmt.Sprintf("marker-%d", seq)
		seq++
		recs = append(recs, record{key: marker, value: marker, ts: clock})
		if !m.pass(marker, clock) {
			t.Fatal("model dropped the marker")
		}
		want = append(want, marker)
		produce(t, in, 1, recs...)
		readUntil(t, out, 60*time.Second, func(got []*kgo.Record) bool {
			return slices.ContainsFunc(got, func(rec *kgo.Record) bool { return string(rec.Value) == marker })
		})
	}

	stop := startApp(t, build(), t.TempDir())
	phase(300)
	stop()
	startApp(t, build(), t.TempDir())
	// Just after the restart, first of all: records late for the stream
	// time reached before it (not late for a stream time restarted from
	// them), and duplicates of ids remembered before it.
	var recs []record
	for i := range 12 {
		id := "e" + strconv.Itoa(i)
		for _, ts := range []int64{clock - 1800, clock - 1800, clock - 300, clock - 300} {
			v := fmt.Sprintf("%s#%d", id, seq)
			seq++
			recs = append(recs, record{key: id, value: v, ts: ts})
			if m.pass(id, ts) {
				want = append(want, v)
			}
		}
	}
	produce(t, in, 1, recs...)
	phase(300)

	// The last marker is out: every decision was made.
	last := want[len(want)-1]
	got := readUntil(t, out, 30*time.Second, func(got []*kgo.Record) bool {
		return slices.ContainsFunc(got, func(rec *kgo.Record) bool { return string(rec.Value) == last })
	})
	var gotV []string
	for _, rec := range got {
		gotV = append(gotV, string(rec.Value))
	}
	if !slices.Equal(gotV, want) {
		for i := range max(len(gotV), len(want)) {
			g, w := "-", "-"
			if i < len(gotV) {
				g = gotV[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("output %d: %s, model %s (first difference; %d outputs, model %d)", i, g, w, len(gotV), len(want))
				break
			}
		}
	}
	t.Logf("%d inputs, %d passed", seq, len(want))
}
