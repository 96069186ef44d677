package tidemarktest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func TestSmoke(t *testing.T) {
	b := topology.NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.Int64())
	s.Filter(func(_ string, v int64) bool { return v > 0 }).
		MapValues(func(_ string, v int64) int64 { return v * 10 }).
		To("out")
	s.GroupBy(func(k string, _ int64) string { return strings.ToUpper(k) }, serde.String()).Count(topology.Named("counts")).ToStream().To("counts-out")
	topo, err := b.Build()
	must(t, err)
	fmt.Println(topo.Describe())
	d, err := tidemarktest.New(topo)
	must(t, err)
	in := tidemarktest.Input(d, "in", serde.String(), serde.Int64())
	must(t, in.Pipe("a", 1, 10))
	must(t, in.Pipe("a", -1, 20))
	must(t, in.Pipe("b", 2, 15))
	fmt.Println(readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.Int64())))
	fmt.Println(readAll(t, tidemarktest.Output(d, "counts-out", serde.String(), serde.Int64())))
}
