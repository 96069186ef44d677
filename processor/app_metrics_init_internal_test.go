package processor

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestCountersOfFixedCausesExportedAtZero: the counters the dashboard and
// the alert rules read by a fixed set of label values are on /metrics from
// the start, at 0. A series that appears only with its first event leaves
// the "aborts" panel blank and hides that first abort from rate().
func TestCountersOfFixedCausesExportedAtZero(t *testing.T) {
	t.Parallel()
	m := newAppMetrics("app")
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := map[string][]string{
		"tidemark_aborts_total":           {"revoked", "session", "prepare", "end", "redo"},
		"tidemark_session_restarts_total": {"fenced", "transaction_timeout", "outcome_unknown", "transient", "rebuild"},
	}
	for name, values := range want {
		got := map[string]float64{}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, s := range f.GetMetric() {
				got[labelValue(s, "cause")] = s.GetCounter().GetValue()
			}
		}
		for _, v := range values {
			n, ok := got[v]
			if !ok {
				t.Errorf("%s{cause=%q} is not exported before its first event", name, v)
			} else if n != 0 {
				t.Errorf("%s{cause=%q} = %v at start, want 0", name, v, n)
			}
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
