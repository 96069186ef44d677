package tidemarktest_test

import (
	"fmt"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// An input record that happens to carry a header named tidemark.tenant
// (set by its producer, who may have read that the tenant travels in it)
// keeps that header as a user header: it names no tenant. Before, the
// repartition source took the first such header as the tenant, so after a
// repartition the record's outputs were charged to whatever the producer
// wrote (a WithTenant source's outputs to the header's tenant, an
// untenanted source's to one at all), and a tenanted record's outputs
// carried the runtime's copy of the header into the user topic.
func TestAUserTenantHeaderIsNotTheTenant(t *testing.T) {
	b := topology.NewBuilder("app")
	tenanted := b.Stream("in", serde.String(), serde.String(), topology.WithTenant(tenantOfValue))
	tenanted.Repartition(topology.Named("rp"), topology.WithPartitions(2)).To("after")
	plain := b.Stream("plain", serde.String(), serde.String())
	plain.Repartition(topology.Named("rp2"), topology.WithPartitions(2)).To("plainafter")
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo)
	must(t, err)
	defer d.Close()
	forged := []topology.Header{{Key: "user", Value: []byte("h")}, {Key: topology.TenantHeader, Value: []byte("mallory")}}
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	pl := tidemarktest.Input(d, "plain", serde.String(), serde.String())
	for i := range 4 {
		must(t, in.PipeRecord(topology.Record[string, string]{Key: fmt.Sprint("k", i), Value: "acme:x", Timestamp: int64(1000 + i), Headers: forged}))
		must(t, pl.PipeRecord(topology.Record[string, string]{Key: fmt.Sprint("k", i), Value: "y", Timestamp: int64(1000 + i), Headers: forged}))
	}
	for topic, want := range map[string]string{"after": "acme", "plainafter": ""} {
		got := readAll(t, tidemarktest.Output(d, topic, serde.String(), serde.String()))
		if len(got) != 4 {
			t.Fatalf("%s: %d outputs, want 4", topic, len(got))
		}
		for _, r := range got {
			if r.Tenant != want {
				t.Fatalf("%s: output tenant %q, want %q (the producer's header is not the tenant)", topic, r.Tenant, want)
			}
			if fmt.Sprint(r.Headers) != fmt.Sprint(forged) {
				t.Fatalf("%s: headers %v, want the input's own %v", topic, r.Headers, forged)
			}
		}
	}
}
