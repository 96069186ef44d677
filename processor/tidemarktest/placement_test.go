package tidemarktest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// placementTopology counts items per "<tenant>:<item>" key through a
// GroupBy placed by p (6 partitions) and writes the counts to "counts"
// placed by p too. Keys carry their tenant, so a key never changes tenant.
func placementTopology(t *testing.T, p *topology.TenantPlacement) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app")
	in := b.Stream("orders", serde.String(), serde.String(), topology.WithTenant(tenantOfValue))
	counts := in.GroupBy(func(_, v string) string { return v }, serde.String(), topology.Named("by-item"),
		topology.WithPartitions(6), topology.WithPlacement(p)).
		Count(topology.Named("cnt"))
	counts.ToStream().MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(nil, serde.String()).To("counts", topology.WithPlacement(p))
	topo, err := b.Build()
	must(t, err)
	return topo
}

// TestTenantPlacementAgainstModel: randomised orders of five tenants (two
// of them hot, with dedicated partitions), out-of-order timestamps and
// tombstones, are counted per key. The reference is a map of counts and
// the placement's definition: a hot tenant's keys live (in the store of
// the GroupBy's task) and are written (to "counts") only in its dedicated
// partitions, every other tenant's only outside all dedicated partitions,
// each key in one partition; and the counts equal the model's.
func TestTenantPlacementAgainstModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	hot := map[string][]int32{"flash": {0, 1}, "vip": {4}}
	p := topology.NewTenantPlacement(hot)
	d, err := tidemarktest.New(placementTopology(t, p), tidemarktest.WithPartitions("orders", 3), tidemarktest.WithPartitions("counts", 6))
	must(t, err)
	defer d.Close()

	tenants := []string{"flash", "vip", "acme", "globex", "initech"}
	allowed := func(tenant string) []int32 {
		if ps, ok := hot[tenant]; ok {
			return ps
		}
		return []int32{2, 3, 5}
	}
	in := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	model := map[string]int64{}
	for i := range 2000 {
		tn := tenants[rng.IntN(len(tenants))]
		if rng.IntN(3) == 0 {
			tn = "flash" // the hot tenant's burst
		}
		key := fmt.Sprintf("u%d", rng.IntN(50))
		ts := int64(10_000 + i*10 - rng.IntN(500)) // late and out of order
		if rng.IntN(20) == 0 {
			must(t, in.PipeTombstone(key, ts)) // skipped by Count
			continue
		}
		v := fmt.Sprintf("%s:item%d", tn, rng.IntN(40))
		must(t, in.Pipe(key, v, ts))
		model[v]++
	}

	latest := map[string]string{}
	part := map[string]int32{}
	for _, r := range readAll(t, tidemarktest.Output(d, "counts", serde.String(), serde.String())) {
		tn := tenantOfValue("", r.Key)
		if !slices.Contains(allowed(tn), r.Partition) {
			t.Fatalf("count of %q (tenant %q) in partition %d, want one of %v", r.Key, tn, r.Partition, allowed(tn))
		}
		if r.Tenant != tn {
			t.Fatalf("count of %q attributed to %q, want %q", r.Key, r.Tenant, tn)
		}
		if q, ok := part[r.Key]; ok && q != r.Partition {
			t.Fatalf("counts of %q in partitions %d and %d", r.Key, q, r.Partition)
		}
		part[r.Key] = r.Partition
		latest[r.Key] = r.Value
	}
	if len(latest) != len(model) {
		t.Fatalf("%d keys counted, model has %d", len(latest), len(model))
	}
	for k, n := range model {
		if latest[k] != strconv.FormatInt(n, 10) {
			t.Fatalf("count of %q = %s, model %d", k, latest[k], n)
		}
		// The state lives in the task of one allowed partition.
		holders := 0
		for q := range int32(6) {
			s, err := d.Store("cnt", q)
			must(t, err)
			_, found, err := s.(store.KeyValue).Get([]byte(k))
			must(t, err)
			if found && !slices.Contains(allowed(tenantOfValue("", k)), q) {
				t.Fatalf("state of %q in the task of partition %d, want one of %v", k, q, allowed(tenantOfValue("", k)))
			}
			if found {
				holders++
			}
		}
		if holders != 1 {
			t.Fatalf("state of %q in %d tasks, want 1", k, holders)
		}
	}
}

// A placement that does not fit the topic fails the driver (as the runtime
// at start), naming the topic and the counts.
func TestTenantPlacementValidatedAtStart(t *testing.T) {
	p := topology.NewTenantPlacement(map[string][]int32{"flash": {0, 1, 2}})
	// counts has 3 partitions: all dedicated, none left to share.
	_, err := tidemarktest.New(placementTopology(t, topology.NewTenantPlacement(map[string][]int32{"flash": {0}})),
		tidemarktest.WithPartitions("counts", 1))
	if !errors.Is(err, topology.ErrInvalidPlacement) || !strings.Contains(err.Error(), `"counts" has 1 partitions`) {
		t.Fatalf("New = %v, want ErrInvalidPlacement naming counts", err)
	}
	_, err = tidemarktest.New(placementTopology(t, p), tidemarktest.WithPartitions("counts", 3))
	if !errors.Is(err, topology.ErrInvalidPlacement) || !strings.Contains(err.Error(), "all 3 are dedicated") {
		t.Fatalf("New = %v, want ErrInvalidPlacement (no shared partition)", err)
	}
}
