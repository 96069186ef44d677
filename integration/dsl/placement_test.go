package dsl_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestPlacementAcrossRestart places a hot tenant on dedicated partitions
// end to end on the broker: the input topic is written through
// processor.TenantPartitioner, the GroupBy's repartition topic and the
// output through topology.WithPlacement. Half the input, a stop, a new App
// with a fresh state dir (the counts restored from their changelog), the
// other half. The reference: every input and output record of the hot
// tenant is in its dedicated partitions and every other record outside
// them, and the final count per key (exactly once across the restart)
// equals the model's.
func TestPlacementAcrossRestart(t *testing.T) {
	const (
		partitions = 4
		n          = 300
	)
	rng := seeded(t)
	hot := map[string][]int32{"flash": {1}}
	shared := []int32{0, 2, 3}
	allowed := func(tenant string) []int32 {
		if ps, ok := hot[tenant]; ok {
			return ps
		}
		return shared
	}
	place := topology.NewTenantPlacement(hot)
	tenantOf := func(_, v string) string { t, _, _ := strings.Cut(v, ":"); return t }
	in := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "place")
	build := func() *topology.Topology {
		b := topology.NewBuilder(app, topology.RequireNamedState())
		b.Stream(in, serde.String(), serde.String(), topology.WithTenant(tenantOf)).
			GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("by-item"), topology.WithPlacement(place)).
			Count(topology.Named("item-count")).
			MapValues(func(_ string, c int64) string { return strconv.FormatInt(c, 10) }).
			WithSerdes(nil, serde.String()).ToStream().To(out, topology.WithPlacement(place))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}

	part, err := processor.TenantPartitioner(place, func(r *kgo.Record) string { return tenantOf("", string(r.Value)) })
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.RecordPartitioner(part))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	tenants := []string{"flash", "acme", "globex", "initech"}
	model := map[string]int{}
	var recs []*kgo.Record
	now := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		tn := tenants[rng.IntN(len(tenants))]
		if rng.IntN(2) == 0 {
			tn = "flash"
		}
		v := fmt.Sprintf("%s:item%d", tn, rng.IntN(15))
		ts := now + int64(i*10) - rng.Int64N(300) // out of order
		r := &kgo.Record{Topic: in, Key: []byte("u" + strconv.Itoa(rng.IntN(40))), Value: []byte(v), Timestamp: time.UnixMilli(ts)}
		if rng.IntN(15) == 0 {
			r.Value = nil // a tombstone: Count skips it
		} else {
			model[v]++
		}
		recs = append(recs, r)
	}
	produceHalf := func(half []*kgo.Record) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, half...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range half {
			if r.Value != nil && !slices.Contains(allowed(tenantOf("", string(r.Value))), r.Partition) {
				t.Fatalf("input %s placed in partition %d, want one of %v", r.Value, r.Partition, allowed(tenantOf("", string(r.Value))))
			}
		}
	}
	modelAfter := func(upTo int) map[string]string {
		m := map[string]int{}
		for _, r := range recs[:upTo] {
			if r.Value != nil {
				m[string(r.Value)]++
			}
		}
		want := map[string]string{}
		for k, c := range m {
			want[k] = strconv.Itoa(c)
		}
		return want
	}
	check := func(want map[string]string) {
		got := readUntil(t, out, 40*time.Second, func(rs []*kgo.Record) bool { return maps.Equal(latest(rs), want) })
		for _, r := range got {
			if tn := tenantOf("", string(r.Key)); !slices.Contains(allowed(tn), r.Partition) {
				t.Fatalf("count of %s in partition %d, want one of %v", r.Key, r.Partition, allowed(tn))
			}
		}
		// Exactly once: each key's counts rise by one per output.
		seen := map[string]int{}
		for _, r := range got {
			c, _ := strconv.Atoi(string(r.Value))
			if c != seen[string(r.Key)]+1 {
				t.Fatalf("count of %s went from %d to %d: duplicated or lost updates", r.Key, seen[string(r.Key)], c)
			}
			seen[string(r.Key)] = c
		}
	}

	stop := startApp(t, build(), t.TempDir())
	produceHalf(recs[:n/2])
	check(modelAfter(n / 2))
	stop()

	stop = startApp(t, build(), t.TempDir())
	defer stop()
	produceHalf(recs[n/2:])
	check(modelAfter(n))
	if len(model) == 0 {
		t.Fatal("empty model")
	}
}
