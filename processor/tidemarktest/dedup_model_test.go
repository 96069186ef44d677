package tidemarktest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
)

// TestDeduplicateMatchesModel pipes random records (ids from a small pool,
// timestamps out of order, some far behind stream time) and checks every
// decision against an independent model of README's rules: stream time is
// the largest timestamp; ids first seen before stream time − window are
// forgotten; a remembered id within window (either way) drops; an unknown
// id passes and is remembered unless late; tombstones and empty ids pass.
func TestDeduplicateMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const window = 500
	for round := range 10 {
		d, err := tidemarktest.New(dedupTopology(t, window*time.Millisecond), tidemarktest.WithDefaultPartitions(1))
		must(t, err)
		in := tidemarktest.Input(d, "in", serde.String(), serde.String())
		out := tidemarktest.Output(d, "out", serde.String(), serde.String())
		st := int64(-1)
		first := map[string]int64{}
		clock := int64(1000 + r.IntN(1000))
		dropped := 0
		for op := range 500 {
			clock += int64(r.IntN(60))
			ts := clock - int64(r.IntN(900)) + 100
			if r.IntN(8) == 0 {
				ts = clock - int64(window+r.IntN(2000))
			}
			ts = max(ts, 0)
			id := fmt.Sprintf("e%d", r.IntN(10))
			if r.IntN(20) == 0 {
				id = "" // no id: passes unchecked
			}
			v := fmt.Sprintf("%s:%d", id, op)
			tomb := r.IntN(25) == 0
			if tomb {
				must(t, in.PipeTombstone("k", ts))
			} else {
				must(t, in.Pipe("k", v, ts))
			}
			// The model.
			st = max(st, ts)
			pass := true
			if !tomb && id != "" {
				for k, f := range first {
					if f < st-window {
						delete(first, k)
					}
				}
				f, found := first[id]
				switch {
				case found && ts-f <= window && f-ts <= window:
					pass = false
				case !found && ts >= st-window:
					first[id] = ts
				}
			}
			var want []tsKV
			if pass {
				want = []tsKV{{Key: "k", Value: v, TS: ts, Tombstone: tomb}}
				if tomb {
					want[0].Value = ""
				}
			} else {
				dropped++
			}
			if got := readTS(t, out); !slices.Equal(got, want) {
				t.Fatalf("round %d op %d: %q@%d (stream time %d, remembered %v): out %v, want %v", round, op, v, ts, st, first, got, want)
			}
		}
		if got := d.Metrics().TotalDropped(); got != int64(dropped) {
			t.Errorf("round %d: %d dropped, model %d", round, got, dropped)
		}
		s, err := d.Store("dedup", 0)
		must(t, err)
		if ids, _ := dedupIDs(t, s); len(ids) != len(first) {
			t.Errorf("round %d: store remembers %v, model %v", round, ids, first)
		}
		must(t, d.Close())
	}
}
