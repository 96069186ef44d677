package tidemarktest_test

import (
	"testing"

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
