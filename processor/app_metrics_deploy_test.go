package processor

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// describedMetrics maps every metric an App registers to its label names
// (constant and variable).
func describedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	m := newAppMetrics("app")
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	constLabels := regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	varLabels := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for _, c := range m.registered {
		ch := make(chan *prometheus.Desc, 256)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name := fq.FindStringSubmatch(s)
			if name == nil {
				t.Fatalf("cannot read the name of %s", s)
			}
			var labels []string
			if cl := constLabels.FindStringSubmatch(s); cl != nil && cl[1] != "" {
				for _, kv := range strings.Split(cl[1], ",") {
					labels = append(labels, strings.TrimSpace(strings.SplitN(kv, "=", 2)[0]))
				}
			}
			if vl := varLabels.FindStringSubmatch(s); vl != nil && vl[1] != "" {
				for _, l := range strings.Split(vl[1], ",") {
					labels = append(labels, strings.Trim(strings.TrimSpace(l), `"`))
				}
			}
			out[name[1]] = labels
		}
	}
	return out
}

// TestOperatorMetricsExist: the per-task and per-operator metrics the
// README promises for alerting exist with their labels.
func TestOperatorMetricsExist(t *testing.T) {
	t.Parallel()
	have := describedMetrics(t)
	for name, labels := range map[string][]string{
		"tidemark_dropped_records_total":      {"app", "task", "node", "reason"},
		"tidemark_task_records_in_total":      {"app", "task"},
		"tidemark_task_lag_records":           {"app", "task"},
		"tidemark_restore_remaining_records":  {"app", "task"},
		"tidemark_commit_phase_seconds":       {"app", "phase"},
		"tidemark_aborts_total":               {"app", "cause"},
		"tidemark_session_restarts_total":     {"app", "cause"},
		"tidemark_observed_staleness_seconds": {"app"},
	} {
		got, ok := have[name]
		if !ok {
			t.Errorf("metric %s is not registered", name)
			continue
		}
		for _, l := range labels {
			if !slices.Contains(got, l) {
				t.Errorf("metric %s has labels %v, want %s among them", name, got, l)
			}
		}
	}
}

var (
	metricRef   = regexp.MustCompile(`\b(tidemark_[a-z_]+)(\{[^}]*\})?`)
	selectorKey = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	byClause    = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkExpr reports what in a PromQL expression names a metric or a label
// that does not exist.
func checkExpr(have map[string][]string, where, expr string) []string {
	var problems []string
	labelsInExpr := map[string]bool{}
	refs := metricRef.FindAllStringSubmatch(expr, -1)
	if len(refs) == 0 && !strings.Contains(where, "templating") {
		problems = append(problems, where+": names no tidemark metric: "+expr)
	}
	for _, ref := range refs {
		name := ref[1]
		labels, ok := have[name]
		if !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); cut {
					if labels, ok = have[base]; ok {
						if suffix == "_bucket" {
							labels = append(slices.Clone(labels), "le")
						}
						break
					}
				}
			}
		}
		if !ok {
			problems = append(problems, where+": no metric "+name)
			continue
		}
		for _, l := range labels {
			labelsInExpr[l] = true
		}
		for _, m := range selectorKey.FindAllStringSubmatch(ref[2], -1) {
			if !slices.Contains(labels, m[1]) {
				problems = append(problems, where+": "+name+" has no label "+m[1])
			}
		}
	}
	for _, by := range byClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(by[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labelsInExpr[l] {
				problems = append(problems, where+": groups by "+l+", a label none of its metrics has")
			}
		}
	}
	return problems
}

// TestDashboardAndAlertsNameRealMetrics: every metric and label the Grafana
// dashboard and the Prometheus alert rules in deploy/ use exists, so
// neither goes silently blank after a rename.
func TestDashboardAndAlertsNameRealMetrics(t *testing.T) {
	t.Parallel()
	have := describedMetrics(t)
	var problems []string

	raw, err := os.ReadFile("../deploy/grafana/tidemark.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Name, Query string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			problems = append(problems, "panel "+p.Title+": no query")
		}
		for _, tg := range p.Targets {
			problems = append(problems, checkExpr(have, "panel "+p.Title, tg.Expr)...)
			exprs++
		}
	}
	for _, v := range dash.Templating.List {
		if strings.Contains(v.Query, "tidemark_") {
			problems = append(problems, checkExpr(have, "templating "+v.Name, v.Query)...)
		}
	}

	raw, err = os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string
				Expr  string
				For   string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				problems = append(problems, "a rule without an alert name: "+r.Expr)
			}
			problems = append(problems, checkExpr(have, "alert "+r.Alert, r.Expr)...)
			alerts++
		}
	}
	if exprs < 10 || alerts < 5 {
		t.Fatalf("read %d dashboard queries and %d alerts: the files lost their content?", exprs, alerts)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckExprFindsMistakes: the checker itself catches a renamed metric,
// a wrong label and a grouping by a label that is not there.
func TestCheckExprFindsMistakes(t *testing.T) {
	t.Parallel()
	have := map[string][]string{"tidemark_x_total": {"app", "cause"}, "tidemark_h_seconds": {"app"}}
	for expr, want := range map[string]int{
		`sum by (app, cause) (rate(tidemark_x_total[5m]))`:                            0,
		`histogram_quantile(0.99, sum by (le) (rate(tidemark_h_seconds_bucket[5m])))`: 0,
		`rate(tidemark_y_total[5m])`:                                                  1,
		`rate(tidemark_x_total{reason="late"}[5m])`:                                   1,
		`sum by (task) (rate(tidemark_x_total[5m]))`:                                  1,
		`sum by (le) (rate(tidemark_h_seconds_sum[5m]))`:                              1,
		`up == 0`: 1,
	} {
		if got := checkExpr(have, "test", expr); len(got) != want {
			t.Errorf("%s: %d problems %v, want %d", expr, len(got), got, want)
		}
	}
}
