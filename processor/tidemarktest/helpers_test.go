package tidemarktest_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/topology"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newDriver(t testing.TB, b *topology.Builder, opts ...tidemarktest.Option) *tidemarktest.Driver {
	t.Helper()
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo, opts...)
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	return d
}

func readAll[K, V any](t testing.TB, o *tidemarktest.OutputTopic[K, V]) []tidemarktest.OutputRecord[K, V] {
	t.Helper()
	recs, err := o.ReadAll()
	must(t, err)
	return recs
}

// testSeed is the seed of a model test: TIDEMARK_SEED when set, else seed.
// It is logged, so that a failing run replays.
func testSeed(t testing.TB, seed uint64) uint64 {
	t.Helper()
	if s := os.Getenv("TIDEMARK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		must(t, err)
		seed = v
	}
	t.Logf("seed %d (replay: TIDEMARK_SEED=%d go test -run '^%s$' ./processor/tidemarktest)", seed, seed, t.Name())
	return seed
}

// randomSeed is testSeed with a seed from the clock.
func randomSeed(t testing.TB) uint64 {
	t.Helper()
	return testSeed(t, uint64(time.Now().UnixNano()))
}
