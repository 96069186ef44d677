package processor_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestTenantAccountingPerTenant runs an App whose source names a tenant per
// record (the value's prefix), through a repartition topic, with two
// tenants: the per-tenant output counters, the staleness histograms and the
// frontier endpoint's tenants section report each tenant's committed
// outputs exactly, and the outputs do not carry the internal tenant header.
func TestTenantAccountingPerTenant(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "tenants")
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String(),
		topology.WithTenant(func(_, v string) string { tn, _, _ := strings.Cut(v, ":"); return tn })).
		SelectKey(func(_, v string) string { return v }).
		Repartition(topology.Named("by-value")).
		MapValues(func(_, v string) string { return strings.ToUpper(v) }).
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Two tenants, interleaved on both partitions: every third record is
	// globex's.
	want := map[string]int{}
	var recs []*kgo.Record
	for i := range 47 {
		tn := "acme"
		if i%3 == 1 {
			tn = "globex"
		}
		want[tn]++
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf("%s:%d", tn, i))})
	}
	kafkatest.Produce(t, recs...)

	app, _ := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	base := baseURL(t, app)
	outs := kafkatest.ConsumeUntil(t, out, 60*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= len(recs) })
	for _, r := range outs {
		for _, h := range r.Headers {
			if h.Key == topology.TenantHeader {
				t.Fatalf("output %s carries the internal %s header", r.Value, h.Key)
			}
		}
	}

	type tenantEntry struct {
		Outputs int64   `json:"outputs"`
		P50     float64 `json:"staleness_p50_ms"`
		P99     float64 `json:"staleness_p99_ms"`
	}
	var fr struct {
		Tenants map[string]tenantEntry `json:"tenants"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		fr.Tenants = nil
		getJSON(t, base+"/frontier", &fr)
		if fr.Tenants["acme"].Outputs == int64(want["acme"]) && fr.Tenants["globex"].Outputs == int64(want["globex"]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/frontier tenants %+v, want outputs %v", fr.Tenants, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(fr.Tenants) != 2 {
		t.Errorf("/frontier tenants %+v: want exactly acme and globex (repartition outputs are not accounted)", fr.Tenants)
	}
	for tn, e := range fr.Tenants {
		if e.P50 <= 0 || e.P99 < e.P50 {
			t.Errorf("/frontier tenant %s: staleness p50 %v p99 %v", tn, e.P50, e.P99)
		}
	}
	t.Logf("/frontier tenants: %+v", fr.Tenants)

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for tn, n := range want {
		for _, line := range []string{
			fmt.Sprintf(`tidemark_tenant_outputs_total{app=%q,tenant=%q} %d`, appID, tn, n),
			fmt.Sprintf(`tidemark_tenant_staleness_seconds_count{app=%q,tenant=%q} `, appID, tn),
		} {
			if !strings.Contains(metrics, line) {
				t.Errorf("/metrics has no %q", line)
			}
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "tidemark_tenant_") && !strings.Contains(l, "_bucket") {
				t.Log(l)
			}
		}
	}
}
