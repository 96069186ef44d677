package processor

import "time"

// TenantStats is one tenant's committed outputs and staleness, as this
// instance accounts them (app_tenants.go): Outputs counts the outputs to
// user sinks it committed for the tenant since it started; the staleness
// quantiles are over the tenant's last 1024 commits, one sample per commit
// with outputs of the tenant: commit time minus the oldest input time among
// them. It is the tenants section of the frontier endpoint, for code in the
// same process (the demo's dashboard) that should not go through HTTP.
type TenantStats struct {
	Outputs      int64
	StalenessP50 time.Duration
	StalenessP99 time.Duration
}

// TenantStats returns the per-tenant accounts by tenant: "" for outputs of
// untenanted sources and punctuations, "other" for tenants past the first
// 100 ("other\uFFFD" for a tenant named "other"). It is empty before the
// first commit with outputs.
func (a *App) TenantStats() map[string]TenantStats {
	snap := a.tenants.snapshot()
	out := make(map[string]TenantStats, len(snap))
	for t, s := range snap {
		out[t] = TenantStats{Outputs: s.Outputs, StalenessP50: msDuration(s.StalenessP50), StalenessP99: msDuration(s.StalenessP99)}
	}
	return out
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
