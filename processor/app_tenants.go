package processor

import (
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-tenant accounting. Every output record carries the tenant of the
// input that caused it (topology.WithTenant, OutputRecord.Tenant; "" for
// sources without a tenant and for punctuations). The session passes it
// to the frontier controller with each output, so frontier.Options.Tenants
// targets and rates apply to the right tenant, and keeps, per tenant, the
// outputs of the open transaction and the oldest input time among them.
// When the transaction commits, each tenant with outputs to a user sink
// (repartition topics are internal and excluded) counts them and observes
// one staleness sample: commit time minus that oldest input time, the
// per-tenant version of tidemark_observed_staleness_seconds.
//
// Label cardinality is bounded: the first maxTenantLabels distinct
// non-empty tenants an App commits outputs for keep their own series and
// HTTP entry; later ones are accounted together under tenantOther. The
// untenanted "" is always its own entry. A tenant literally named
// tenantOther is reported under another label (tenantLabel), or the
// overflow would be merged into its account.

// maxTenantLabels caps the tenants an App accounts separately.
const maxTenantLabels = 100

// tenantOther is the account of tenants beyond maxTenantLabels: a label
// no tenant is reported under (tenantLabel).
const tenantOther = "other"

// tenantSamples is how many recent staleness samples (one per tenant per
// commit) the HTTP quantiles are computed over.
const tenantSamples = 1024

func newTenantMetrics(labels prometheus.Labels, buckets []float64) (*prometheus.CounterVec, *prometheus.HistogramVec) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_tenant_outputs_total",
			Help:        "Output records committed to user sinks, per tenant (topology.WithTenant; the first 100 tenants, then \"other\"; a tenant named \"other\" is \"other\\uFFFD\").",
			ConstLabels: labels}, []string{"tenant"}),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_tenant_staleness_seconds",
			Help:        "At each commit, per tenant with outputs in it: commit time minus the oldest input time among the tenant's outputs.",
			ConstLabels: labels, Buckets: buckets}, []string{"tenant"})
}

// tenantTxn is one tenant's share of the open transaction.
type tenantTxn struct {
	outputs int
	oldest  time.Time
}

// addTenantOutput accounts one output for tenant in the transaction; the
// caller holds t.mu.
func (t *txnState) addTenantOutput(tenant string, input time.Time) {
	if t.byTenant == nil {
		t.byTenant = map[string]*tenantTxn{}
	}
	tt := t.byTenant[tenant]
	if tt == nil {
		tt = &tenantTxn{oldest: input}
		t.byTenant[tenant] = tt
	}
	tt.outputs++
	if input.Before(tt.oldest) {
		tt.oldest = input
	}
}

// tenantAccounts is an App's per-tenant totals, for the metrics and the
// frontier endpoint; it outlives sessions.
type tenantAccounts struct {
	mu       sync.Mutex
	accounts map[string]*tenantAccount // by label
	named    int                       // non-empty labels other than tenantOther
}

type tenantAccount struct {
	outputs int64
	samples []float64 // staleness in seconds, a ring of tenantSamples
	next    int
}

// label is the account tenant is reported under; the caller holds a.mu.
func (a *tenantAccounts) label(tenant string) string {
	tenant = tenantLabel(tenant)
	if _, ok := a.accounts[tenant]; ok || tenant == "" {
		return tenant
	}
	if a.named >= maxTenantLabels {
		return tenantOther
	}
	a.named++
	return tenant
}

// observe accounts one committed transaction's outputs of every tenant.
func (a *tenantAccounts) observe(now time.Time, byTenant map[string]*tenantTxn, m *appMetrics) {
	if len(byTenant) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.accounts == nil {
		a.accounts = map[string]*tenantAccount{}
	}
	// By account first: the tenants past maxTenantLabels are one account,
	// "other", with one sample per commit like any tenant (accounted one
	// by one, thousands of sellers put thousands of samples in it per
	// commit, and as many Prometheus lookups on the commit path).
	byLabel := make(map[string]tenantTxn, min(len(byTenant), maxTenantLabels+2))
	for tenant, tt := range byTenant {
		l := a.label(tenant)
		sum, ok := byLabel[l]
		if !ok || tt.oldest.Before(sum.oldest) {
			sum.oldest = tt.oldest
		}
		sum.outputs += tt.outputs
		byLabel[l] = sum
	}
	for l, tt := range byLabel {
		acc := a.accounts[l]
		if acc == nil {
			acc = &tenantAccount{}
			a.accounts[l] = acc
		}
		stale := max(0, now.Sub(tt.oldest).Seconds())
		acc.outputs += int64(tt.outputs)
		if len(acc.samples) < tenantSamples {
			acc.samples = append(acc.samples, stale)
		} else {
			acc.samples[acc.next] = stale
			acc.next = (acc.next + 1) % tenantSamples
		}
		m.tenantOutputs.WithLabelValues(l).Add(float64(tt.outputs))
		m.tenantStaleness.WithLabelValues(l).Observe(stale)
	}
}

// tenantJSON is one tenant's entry of the frontier endpoint: committed
// outputs and the p50/p99 staleness over its last tenantSamples commits.
type tenantJSON struct {
	Outputs      int64   `json:"outputs"`
	StalenessP50 float64 `json:"staleness_p50_ms"`
	StalenessP99 float64 `json:"staleness_p99_ms"`
}

func (a *tenantAccounts) snapshot() map[string]tenantJSON {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.accounts) == 0 {
		return nil
	}
	out := make(map[string]tenantJSON, len(a.accounts))
	for l, acc := range a.accounts {
		s := slices.Clone(acc.samples) // never empty: made at a sample
		slices.Sort(s)
		out[l] = tenantJSON{Outputs: acc.outputs, StalenessP50: quantile(s, 0.5) * 1000, StalenessP99: quantile(s, 0.99) * 1000}
	}
	return out
}

// tenantLabel is the label tenant is reported under: validLabel, except
// that it is never tenantOther, the overflow account's label. A tenant
// named tenantOther, or tenantOther followed by U+FFFDs, gets one U+FFFD
// more; so distinct labels stay distinct.
func tenantLabel(tenant string) string {
	l := validLabel(tenant)
	if strings.TrimRight(l, "\uFFFD") == tenantOther {
		return l + "\uFFFD"
	}
	return l
}

// validLabel is tenant as a Prometheus label value: its invalid UTF-8
// bytes replaced by U+FFFD. A tenant is whatever a source's WithTenant
// function returns (a name cut mid-rune, bytes of a binary key), and
// WithLabelValues panics on invalid UTF-8: the first commit with an output
// of such a tenant crashed the process.
func validLabel(tenant string) string {
	if utf8.ValidString(tenant) {
		return tenant
	}
	return strings.ToValidUTF8(tenant, "\uFFFD")
}
