package tidemarktest_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// windowModel is the reference semantics of a hopping-window count with
// grace, written as plainly as possible.
type windowModel struct {
	size, advance, grace int64
	observed             int64
	counts               map[string]int64 // "key@start" -> count
	dropped              int64
}

func (m *windowModel) add(key string, ts int64) {
	m.observed = max(m.observed, ts)
	late := false
	for start := ts - ts%m.advance; start > ts-m.size && start >= 0; start -= m.advance {
		if start+m.size+m.grace <= m.observed {
			late = true
			continue
		}
		m.counts[fmt.Sprintf("%s@%d", key, start)]++
	}
	if late {
		m.dropped++
	}
}

// Random out-of-order input must give exactly the model's counts and drops.
func TestWindowedCountMatchesReferenceModel(t *testing.T) {
	shapes := []struct {
		name                 string
		size, advance, grace time.Duration
	}{
		{"tumbling without grace", 10 * time.Second, 10 * time.Second, 0},
		{"tumbling with grace", 10 * time.Second, 10 * time.Second, 3 * time.Second},
		{"hopping with grace", 10 * time.Second, 4 * time.Second, 2 * time.Second},
	}
	for _, sh := range shapes {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/seed-%d", sh.name, seed), func(t *testing.T) {
				b := topology.NewBuilder("app")
				g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
				topology.WindowedBy(g, topology.HoppingWindows(sh.size, sh.advance, sh.grace)).
					Count(topology.Named("counts")).ToStream().To("out")
				d := newDriver(t, b)
				in := tidemarktest.Input(d, "in", serde.String(), serde.String())
				m := &windowModel{size: sh.size.Milliseconds(), advance: sh.advance.Milliseconds(), grace: sh.grace.Milliseconds(), counts: map[string]int64{}}
				rng := rand.New(rand.NewPCG(seed, 42))
				ts := int64(0)
				for range 500 {
					ts += rng.Int64N(400)
					// Up to 8s out of order: some within grace, some not.
					event := max(0, ts-rng.Int64N(8000))
					key := fmt.Sprintf("k%d", rng.IntN(4))
					must(t, in.Pipe(key, "", event))
					m.add(key, event)
				}
				got := map[string]int64{}
				for _, r := range readAll(t, tidemarktest.Output(d, "out", topology.TimeWindowedSerde(serde.String(), sh.size), serde.Int64())) {
					got[fmt.Sprintf("%s@%d", r.Key.Key, r.Key.Start)] = r.Value
				}
				if len(got) != len(m.counts) {
					t.Errorf("%d windows emitted, model has %d", len(got), len(m.counts))
				}
				for w, n := range m.counts {
					if got[w] != n {
						t.Errorf("window %s: last emitted count %d, model %d", w, got[w], n)
					}
				}
				if dropped := d.Metrics().Dropped[topology.DropLate]; dropped != m.dropped {
					t.Errorf("dropped %d late records, model %d", dropped, m.dropped)
				}
				if m.dropped == 0 {
					t.Errorf("the input should include records beyond grace; the test is too gentle")
				}
			})
		}
	}
}
