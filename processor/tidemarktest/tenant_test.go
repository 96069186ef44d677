package tidemarktest_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// tenantOfValue is the test's tenant extractor: values are "<tenant>:<payload>".
func tenantOfValue(_, v string) string { t, _, _ := strings.Cut(v, ":"); return t }

// Outputs carry the tenant of the input that caused them: directly, after a
// repartition (the tenant travels in the tidemark.tenant header of the
// internal topic, which the output does not see), and out of an
// aggregation behind that repartition. A source without WithTenant gives "".
// The reference is the input itself: every output names its cause.
func TestOutputsCarryInputTenant(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))

	b := topology.NewBuilder("app")
	in := b.Stream("in", serde.String(), serde.String(), topology.WithTenant(tenantOfValue))
	in.To("direct")
	// Rekey by payload, so records change partition (and task) through the
	// repartition topic; the value keeps its tenant prefix.
	rekeyed := in.SelectKey(func(_, v string) string { _, p, _ := strings.Cut(v, ":"); return p }).
		Repartition(topology.Named("rp"), topology.WithPartitions(3))
	rekeyed.To("after")
	rekeyed.GroupByKey().Count(topology.Named("cnt")).ToStream().
		MapValues(func(_ string, n int64) string { return fmt.Sprint(n) }).WithSerdes(nil, serde.String()).To("counts")
	b.Stream("plain", serde.String(), serde.String()).To("plainout")
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo, tidemarktest.WithPartitions("in", 2))
	must(t, err)
	defer d.Close()

	src := tidemarktest.Input(d, "in", serde.String(), serde.String())
	plain := tidemarktest.Input(d, "plain", serde.String(), serde.String())
	tenants := []string{"acme", "globex", "initech"}
	// Each payload belongs to one tenant, so the count of a payload key
	// is attributed to that tenant.
	payloadTenant := map[string]string{}
	want := map[string]int{}
	n := 200
	for i := range n {
		tn := tenants[rng.IntN(len(tenants))]
		payload := fmt.Sprintf("p%d", rng.IntN(20))
		if prev, ok := payloadTenant[payload]; ok {
			tn = prev
		}
		payloadTenant[payload] = tn
		v := tn + ":" + payload
		key := fmt.Sprintf("k%d", rng.IntN(7))
		// Out-of-order timestamps: tenancy does not depend on event time.
		must(t, src.PipeRecord(topology.Record[string, string]{Key: key, Value: v, Timestamp: int64(1000 + i*10 - rng.IntN(50)),
			Headers: []topology.Header{{Key: "user", Value: []byte("h")}}}))
		want[tn]++
		must(t, plain.Pipe(key, v, int64(1000+i)))
	}

	check := func(topic string, tenantOf func(r tidemarktest.OutputRecord[string, string]) string) map[string]int {
		got := map[string]int{}
		for _, r := range readAll(t, tidemarktest.Output(d, topic, serde.String(), serde.String())) {
			if w := tenantOf(r); r.Tenant != w {
				t.Fatalf("%s: %q=%q has tenant %q, want %q", topic, r.Key, r.Value, r.Tenant, w)
			}
			for _, h := range r.Headers {
				if h.Key == topology.TenantHeader {
					t.Fatalf("%s: output carries the internal %s header", topic, topology.TenantHeader)
				}
			}
			if len(r.Headers) != 1 || r.Headers[0].Key != "user" {
				t.Fatalf("%s: headers %v, want only the user's", topic, r.Headers)
			}
			got[r.Tenant]++
		}
		return got
	}
	byValue := func(r tidemarktest.OutputRecord[string, string]) string { return tenantOfValue("", r.Value) }
	for _, topic := range []string{"direct", "after"} {
		if got := check(topic, byValue); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: outputs per tenant %v, want %v", topic, got, want)
		}
	}
	counts := readAll(t, tidemarktest.Output(d, "counts", serde.String(), serde.String()))
	if len(counts) != n {
		t.Fatalf("counts: %d outputs, want %d", len(counts), n)
	}
	for _, r := range counts {
		if w := payloadTenant[r.Key]; r.Tenant != w {
			t.Fatalf("counts: %q=%q has tenant %q, want %q", r.Key, r.Value, r.Tenant, w)
		}
	}
	for _, r := range readAll(t, tidemarktest.Output(d, "plainout", serde.String(), serde.String())) {
		if r.Tenant != "" {
			t.Fatalf("plainout: tenant %q from a source without WithTenant", r.Tenant)
		}
	}
}

// The final result of a window belongs to no one record: a record of one
// tenant that advances stream time past other tenants' windows does not
// charge their finals to itself. They carry "" (as punctuation outputs do),
// and a later record's own outputs get its tenant back.
func TestWindowFinalsAreUntenanted(t *testing.T) {
	b := topology.NewBuilder("app")
	clicks := b.Stream("clicks", serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k }))
	clicks.To("echo")
	topology.WindowedBy(clicks.GroupByKey(), topology.TumblingWindows(10*time.Second, 0)).
		Count(topology.Named("w"), topology.EmitFinal()).ToStream().
		SelectKey(func(w topology.Windowed[string], _ int64) string { return fmt.Sprint(w.Key, "@", w.Start) }).
		MapValues(func(_ string, n int64) string { return fmt.Sprint(n) }).
		WithSerdes(serde.String(), serde.String()).To("finals")
	clicks.To("echo2") // forwarded after the window operator released the finals
	topo, err := b.Build()
	must(t, err)
	d, err := tidemarktest.New(topo)
	must(t, err)
	defer d.Close()
	in := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
	must(t, in.Pipe("acme", "a", 1000))
	must(t, in.Pipe("acme", "b", 2000))
	must(t, in.Pipe("globex", "c", 25000)) // closes acme's [0,10000)
	finals := readAll(t, tidemarktest.Output(d, "finals", serde.String(), serde.String()))
	if len(finals) != 1 || finals[0].Key != "acme@0" || finals[0].Tenant != "" {
		t.Fatalf("finals %+v, want one untenanted acme@0", finals)
	}
	echo := readAll(t, tidemarktest.Output(d, "echo", serde.String(), serde.String()))
	if len(echo) != 3 || echo[2].Tenant != "globex" || echo[0].Tenant != "acme" {
		t.Fatalf("echo %+v, want each record's own tenant", echo)
	}
	echo2 := readAll(t, tidemarktest.Output(d, "echo2", serde.String(), serde.String()))
	if len(echo2) != 3 || echo2[2].Tenant != "globex" {
		t.Fatalf("echo2 %+v: the record's tenant is not restored after the finals", echo2)
	}
}
