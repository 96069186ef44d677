package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A tenant is whatever the source's WithTenant function returns, and
// nothing makes that valid UTF-8 (a tenant cut from a binary key, or a
// multi-byte name cut short). Prometheus refuses such a label value and
// WithLabelValues panics on it: the first commit with an output of that
// tenant crashed the process. The tenant is reported with its invalid
// bytes replaced, and its outputs are counted.
func TestTenantAccountingSurvivesAnInvalidUTF8Tenant(t *testing.T) {
	t.Parallel()
	m := newAppMetrics("app")
	var a tenantAccounts
	now := time.Unix(1_700_000_000, 0)
	bad := "s\xe9ller" // Latin-1, not UTF-8
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("observe panicked on tenant %q: %v", bad, r)
			}
		}()
		a.observe(now, map[string]*tenantTxn{bad: {outputs: 3, oldest: now.Add(-time.Second)}, "ok": {outputs: 1, oldest: now}}, m)
	}()
	snap := a.snapshot()
	if len(snap) != 2 || snap["ok"].Outputs != 1 {
		t.Fatalf("accounts %v, want the valid tenant and the invalid one", snap)
	}
	var got int64
	for l, s := range snap {
		if l != "ok" {
			got = s.Outputs
			if l != "s\ufffdller" {
				t.Fatalf("invalid tenant reported as %q, want %q", l, "s\ufffdller")
			}
		}
	}
	if got != 3 {
		t.Fatalf("invalid tenant's outputs %d, want 3", got)
	}
	if v := metricValue(m.tenantOutputs.WithLabelValues("s\ufffdller")); v != 3 {
		t.Fatalf("tidemark_tenant_outputs_total of the invalid tenant %v, want 3", v)
	}
}

// The tenants past the first maxTenantLabels share the "other" account,
// which is reported like a tenant: one staleness sample per commit (the
// oldest input among its outputs), its p99 over its last 1024 commits.
// Each overflow tenant of a commit was accounted separately under
// "other": with thousands of sellers one commit put thousands of samples
// in its histogram and overwrote its whole HTTP window, and each was a
// Prometheus lookup on the commit path (6 ms a commit with 10,000 sellers).
func TestOverflowTenantsAreOneAccountPerCommit(t *testing.T) {
	t.Parallel()
	m := newAppMetrics("app")
	var a tenantAccounts
	now := time.Unix(1_700_000_000, 0)
	first := map[string]*tenantTxn{}
	for i := range maxTenantLabels {
		first[fmt.Sprint("named-", i)] = &tenantTxn{outputs: 1, oldest: now}
	}
	a.observe(now, first, m)
	now = now.Add(time.Second)
	over := map[string]*tenantTxn{}
	for i := range 2000 {
		over[fmt.Sprint("seller-", i)] = &tenantTxn{outputs: 2, oldest: now.Add(-time.Duration(i%500) * time.Millisecond)}
	}
	a.observe(now, over, m)
	other := a.snapshot()[tenantOther]
	if other.Outputs != 4000 {
		t.Fatalf("other: %d outputs, want 4000", other.Outputs)
	}
	if other.StalenessP50 != 499 || other.StalenessP99 != 499 {
		t.Fatalf("other: p50 %vms p99 %vms, want one sample of the commit's oldest input, 499ms", other.StalenessP50, other.StalenessP99)
	}
	var d dto.Metric
	if err := m.tenantStaleness.WithLabelValues(tenantOther).(prometheus.Histogram).Write(&d); err != nil {
		t.Fatal(err)
	}
	if n := d.GetHistogram().GetSampleCount(); n != 1 {
		t.Fatalf("other's staleness histogram has %d samples after one commit, want 1", n)
	}
}

// A tenant literally named "other" is a tenant like any other: its outputs
// and staleness are its own, not merged with the overflow account of the
// tenants past the first maxTenantLabels, which is reported as "other".
// It was reported as "other" too, so the overflow tenants' outputs were
// added to its count and their staleness samples to its quantiles; it is
// reported as "other" followed by U+FFFD.
func TestATenantNamedOtherIsNotTheOverflow(t *testing.T) {
	t.Parallel()
	m := newAppMetrics("app")
	var a tenantAccounts
	now := time.Unix(1_700_000_000, 0)
	first := map[string]*tenantTxn{"other": {outputs: 7, oldest: now.Add(-10 * time.Millisecond)}}
	for i := range maxTenantLabels - 1 {
		first[fmt.Sprint("named-", i)] = &tenantTxn{outputs: 1, oldest: now}
	}
	a.observe(now, first, m)
	over := map[string]*tenantTxn{}
	for i := range 50 {
		over[fmt.Sprint("seller-", i)] = &tenantTxn{outputs: 2, oldest: now.Add(-time.Second)}
	}
	over["other"] = &tenantTxn{outputs: 1, oldest: now.Add(-10 * time.Millisecond)}
	a.observe(now, over, m)
	snap := a.snapshot()
	if got := snap[tenantOther].Outputs; got != 100 {
		t.Fatalf("the overflow account %q counted %d outputs, want the 50 overflow tenants' 100", tenantOther, got)
	}
	real := snap["other\ufffd"]
	if real.Outputs != 8 || real.StalenessP99 != 10 {
		t.Fatalf("the tenant named \"other\" (reported as %q): %d outputs, p99 %vms; want 8 and 10ms (accounts %d)", "other\ufffd", real.Outputs, real.StalenessP99, len(snap))
	}
	if v := metricValue(m.tenantOutputs.WithLabelValues(tenantOther)); v != 100 {
		t.Fatalf("tidemark_tenant_outputs_total{tenant=%q} %v, want 100", tenantOther, v)
	}
	// The escape keeps distinct tenants distinct.
	for _, tn := range []string{"other\ufffd", "other\ufffd\ufffd", "others", ""} {
		if l := tenantLabel(tn); l == tenantOther || l == tenantLabel("other") && tn != "other" {
			t.Fatalf("tenant %q reported as %q, the label of another", tn, l)
		}
	}
}
