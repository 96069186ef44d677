package tidemarktest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestTableTombstoneForAbsentKeyGoesDownstream: Kafka Streams'
// KTableSource (plain or versioned store, or none) forwards a tombstone for
// a key the table does not hold as Change(null, null), which toStream()
// writes as a tombstone and mapValues passes on; a filter whose parent is
// materialized (it asks for old values) drops it.
func TestTableTombstoneForAbsentKeyGoesDownstream(t *testing.T) {
	all := []string{"a=1@1", "b=∅@2", "a=∅@3", "a=∅@4"}
	for _, tc := range []struct {
		name  string
		build func(b *topology.Builder) topology.Table[string, string]
		want  []string
	}{{
		name: "Table",
		build: func(b *topology.Builder) topology.Table[string, string] {
			return b.Table("in", serde.String(), serde.String(), topology.Named("t"))
		},
		want: all,
	}, {
		name: "ToTable",
		build: func(b *topology.Builder) topology.Table[string, string] {
			return b.Stream("in", serde.String(), serde.String()).ToTable(topology.Named("t"))
		},
		want: all,
	}, {
		name: "versioned Table",
		build: func(b *topology.Builder) topology.Table[string, string] {
			return b.Table("in", serde.String(), serde.String(), topology.Named("t"), topology.Versioned(time.Minute))
		},
		want: all,
	}, {
		name: "MapValues",
		build: func(b *topology.Builder) topology.Table[string, string] {
			return b.Table("in", serde.String(), serde.String(), topology.Named("t")).
				MapValues(func(_, v string) string { return strings.Repeat(v, 2) })
		},
		want: []string{"a=11@1", "b=∅@2", "a=∅@3", "a=∅@4"},
	}, {
		name: "Filter",
		build: func(b *topology.Builder) topology.Table[string, string] {
			return b.Table("in", serde.String(), serde.String(), topology.Named("t")).
				Filter(func(_, v string) bool { return v != "x" })
		},
		want: []string{"a=1@1", "a=∅@3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			tc.build(b).ToStream().To("out")
			d := newDriver(t, b)
			in := tidemarktest.Input(d, "in", serde.String(), serde.String())
			out := tidemarktest.Output(d, "out", serde.String(), serde.String())
			must(t, in.Pipe("a", "1", 1))
			must(t, in.PipeTombstone("b", 2)) // never held
			must(t, in.PipeTombstone("a", 3))
			must(t, in.PipeTombstone("a", 4)) // deleted already
			if got := changes(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("changes %v, Kafka Streams %v", got, tc.want)
			}
		})
	}
}
