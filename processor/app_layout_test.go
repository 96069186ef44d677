package processor

import (
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func TestSizeLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		build     func(b *topology.Builder)
		user      map[string]int32
		wantTasks []int32
		wantErr   string
	}{
		{"a repartition topic takes the task count of the sub-topology writing it",
			func(b *topology.Builder) {
				b.Stream("orders", serde.String(), serde.String()).
					SelectKey(func(_, v string) string { return v }).
					GroupByKey(topology.Named("by-user")).Count(topology.Named("per-user")).ToStream().To("out")
			},
			map[string]int32{"orders": 6, "out": 2}, []int32{6, 6}, ""},
		{"a sub-topology reading its own repartition output is sized from its other inputs",
			func(b *topology.Builder) {
				in := b.Stream("events", serde.String(), serde.String())
				again := in.SelectKey(func(_, v string) string { return v }).Repartition(topology.Named("rekeyed"))
				again.Merge(in).To("out")
			},
			map[string]int32{"events": 3, "out": 1}, nil, ""},
		{"a repartition topic with WithPartitions has that count, and so its reader's tasks",
			func(b *topology.Builder) {
				b.Stream("orders", serde.String(), serde.String()).
					GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("by-item"), topology.WithPartitions(6)).
					Count(topology.Named("per-item")).ToStream().To("out")
			},
			map[string]int32{"orders": 2, "out": 6}, []int32{2, 6}, ""},
		{"a cogroup input repartitioned WithPartitions to the other input's count is co-partitioned with it",
			func(b *topology.Builder) {
				small := b.Stream("small", serde.String(), serde.String()).
					GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("small-by-v"), topology.WithPartitions(4))
				big := b.Stream("big", serde.String(), serde.String()).GroupByKey()
				small.Cogroup(func(_, v, agg string) string { return agg + v }).
					Cogroup(big, func(_, v, agg string) string { return agg + v }).
					Aggregate(func() string { return "" }, serde.String(), topology.Named("agg")).ToStream().To("out")
			},
			map[string]int32{"small": 2, "big": 4, "out": 4}, []int32{2, 4}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			tt.build(b)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			l := &layout{partitions: map[string]int32{}}
			for k, v := range tt.user {
				l.partitions[k] = v
			}
			err = sizeLayout(topo, l)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("sizeLayout: %v\n%s", err, topo.Describe())
			}
			for i, n := range l.tasks {
				if n == 0 {
					t.Fatalf("sub-topology %d unsized: %v", i, l.tasks)
				}
				if tt.wantTasks != nil && n != tt.wantTasks[i] {
					t.Fatalf("tasks = %v, want %v", l.tasks, tt.wantTasks)
				}
			}
			for _, r := range topo.RepartitionTopics() {
				if l.partitions[r.Name] == 0 {
					t.Fatalf("repartition topic %s unsized", r.Name)
				}
			}
		})
	}
}
