package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/processor"
)

// dashboardTenants is how many tenants the dashboard lists: the busiest by
// committed outputs.
const dashboardTenants = 6

// tenantRow is one tenant of the dashboard's per-tenant freshness section.
type tenantRow struct {
	Tenant   string
	Outputs  int64
	P50, P99 time.Duration
}

// topTenants turns the App's per-tenant accounting (App.TenantStats: the
// marketplace sources name the seller with topology.WithTenant) into the
// n tenants with the most committed outputs, busiest first, ties by name.
// Its staleness is the runtime's own measure, commit time minus the oldest
// input time among the tenant's outputs in each commit, over the tenant's
// last 1024 commits; the headline figures above it are the external
// consumer's, receive time minus event time, over all tenants.
func topTenants(stats map[string]processor.TenantStats, n int) []tenantRow {
	rows := make([]tenantRow, 0, len(stats))
	for t, s := range stats {
		rows = append(rows, tenantRow{Tenant: t, Outputs: s.Outputs, P50: s.StalenessP50, P99: s.StalenessP99})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Outputs != rows[j].Outputs {
			return rows[i].Outputs > rows[j].Outputs
		}
		return rows[i].Tenant < rows[j].Tenant
	})
	if len(rows) > n {
		rows = rows[:n]
	}
	return rows
}

// tenantLabel names the runtime's special accounts.
func tenantLabel(t string) string {
	if t == "" {
		return "(untenanted)"
	}
	return t
}

// renderTenants writes the dashboard's per-tenant freshness section.
func renderTenants(b *strings.Builder, rows []tenantRow, total int) {
	fmt.Fprintf(b, "\n  per-tenant freshness (top %d of %d tenants by committed outputs; commit − oldest input, last 1024 commits)\n", len(rows), total)
	if len(rows) == 0 {
		b.WriteString("    (no committed outputs yet)\n")
		return
	}
	fmt.Fprintf(b, "    %-22s %10s   %10s   %10s\n", "tenant", "outputs", "p50", "p99")
	for _, r := range rows {
		fmt.Fprintf(b, "    %-22s %10d   %10s   %10s\n", tenantLabel(r.Tenant), r.Outputs, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	}
}

// tenantSummary is the final summary's per-tenant part.
func tenantSummary(rows []tenantRow) string {
	if len(rows) == 0 {
		return ""
	}
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("%s %d outputs p50 %s p99 %s", tenantLabel(r.Tenant), r.Outputs, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
	}
	return "; top tenants: " + strings.Join(parts, ", ")
}
