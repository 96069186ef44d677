package processor

import (
	"testing"
	"time"
)

// A tenant is whatever the source's WithTenant function returns, and
// nothing makes that valid UTF-8 (a tenant cut from a binary key, or a
// multi-byte name cut short). Prometheus refuses such a label value and
// WithLabelValues panics on it: the first commit with an output of that
// tenant crashed the process. The tenant is reported with its invalid
// bytes replaced, and its outputs are counted.
func TestTenantAccountingSurvivesAnInvalidUTF8Tenant(t *testing.T) {
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
