package tidemarktest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
)

// TestVersionedJoinBeforeCutoffJoinsLatest checks stream records older
// than a versioned table's history against Kafka Streams'
// KStreamKTableJoin on a versioned store, whose get(key, asOf) answers a
// key's latest version when it was already valid at asOf, however far
// stream time moved on (the latest version never expires), and nothing
// else older than the history.
func TestVersionedJoinBeforeCutoffJoinsLatest(t *testing.T) {
	d, err := tidemarktest.New(versionedJoinTopology(t, 1000*time.Millisecond), tidemarktest.WithDefaultPartitions(1))
	must(t, err)
	defer d.Close()
	pin := tidemarktest.Input(d, "prices", serde.String(), serde.Int64())
	ain := tidemarktest.Input(d, "cart-adds", serde.String(), serde.Int64())
	// History 1000, table stream time 20000: cutoff 19000.
	must(t, pin.Pipe("steady", 10, 1000))   // never changes again
	must(t, pin.Pipe("changed", 20, 1000))  // history from 19500 on
	must(t, pin.Pipe("changed", 21, 19500)) //
	must(t, pin.Pipe("deleted", 30, 1000))  // deleted at 2000
	must(t, pin.PipeTombstone("deleted", 2000))
	must(t, pin.Pipe("clock", 1, 20000))
	readAll(t, tidemarktest.Output(d, "price-updates", serde.String(), serde.Int64()))

	cases := []struct {
		sku   string
		ts    int64
		price int64 // 0: no price found
	}{
		{"steady", 5000, 10},   // before the cutoff: the latest, valid since 1000
		{"steady", 1000, 10},   // at the latest version's timestamp
		{"steady", 999, 0},     // before the latest version
		{"steady", 18999, 10},  // just before the cutoff
		{"changed", 5000, 0},   // 20 was valid then, but is history past the cutoff
		{"changed", 19000, 20}, // at the cutoff: history answers
		{"changed", 19600, 21},
		{"deleted", 1500, 0}, // the latest is a delete
		{"deleted", 5000, 0},
		{"unknown", 5000, 0},
	}
	outs := map[string]*tidemarktest.OutputTopic[string, string]{}
	for _, o := range []string{"inner", "left", "even"} {
		outs[o] = tidemarktest.Output(d, o, serde.String(), serde.String())
	}
	for i, c := range cases {
		qty := int64(i + 1)
		must(t, ain.Pipe(c.sku, qty, c.ts))
		joined := fmt.Sprintf("%d x %d", qty, c.price)
		want := map[string][]string{"inner": nil, "left": {fmt.Sprintf("%d x unknown", qty)}, "even": nil}
		if c.price != 0 {
			want["inner"], want["left"] = []string{joined}, []string{joined}
			if c.price%2 == 0 {
				want["even"] = []string{joined}
			}
		}
		for name, o := range outs {
			var got []string
			for _, rec := range readAll(t, o) {
				got = append(got, rec.Value)
			}
			if !slices.Equal(got, want[name]) {
				t.Errorf("cart add %s@%d: %s = %q, want %q", c.sku, c.ts, name, got, want[name])
			}
		}
	}
}
