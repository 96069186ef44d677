package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
)

// The demo on the embedded broker must process records and produce
// committed outputs within a few seconds, printing one line per second
// when stdout is not a terminal and a final summary.
func TestDemoOnEmbeddedBrokerReportsProcessedRecordsAndOutputs(t *testing.T) {
	var out, errs bytes.Buffer
	// The stream opens with the catalog (~1600 listings): at 1000/s it is
	// through in under 2 s, leaving the rest of the run to activity.
	f := demoFlags{duration: 10 * time.Second, rate: 1000, seed: 1, partitions: 2, httpAddr: "127.0.0.1:0",
		app: "demo-test", threshold: 20, disorder: 2 * time.Second, stateDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := runDemo(ctx, &out, &errs, f); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("want a line per second and a summary, got:\n%s", out.String())
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("non-terminal output contains ANSI escapes:\n%s", out.String())
	}
	summary := lines[len(lines)-1]
	m := regexp.MustCompile(`processed (\d+), produced (\d+) outputs \(inventory-availability=(\d+)`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("summary not understood: %q", summary)
	}
	for i, what := range []string{"processed", "outputs", "inventory-availability outputs"} {
		if n, _ := strconv.Atoi(m[i+1]); n == 0 {
			t.Errorf("%s = 0 in %q", what, summary)
		}
	}
	// Generated counts every topic, clicks (read by no pipeline) included;
	// processed is at most what reached the pipelines' inputs.
	g := regexp.MustCompile(`generated (\d+) records \((\d+) of them in the pipelines' input topics`).FindStringSubmatch(summary)
	if g == nil {
		t.Fatalf("summary names no pipeline input count: %q", summary)
	}
	generated, _ := strconv.Atoi(g[1])
	inputs, _ := strconv.Atoi(g[2])
	processed, _ := strconv.Atoi(m[1])
	if inputs == 0 || inputs > generated || processed > inputs {
		t.Errorf("generated %d, inputs %d, processed %d: want 0 < processed ≤ inputs ≤ generated", generated, inputs, processed)
	}
	// Per-tenant freshness from the App's accounting: the sources name the
	// seller, so sellers appear with committed outputs.
	if tm := regexp.MustCompile(`; top tenants: seller-\d+ ([1-9]\d*) outputs p50 \S+ p99 \S+`).FindStringSubmatch(summary); tm == nil {
		t.Errorf("summary has no per-tenant freshness of a seller with outputs: %q", summary)
	}
}

// The terminal dashboard renders the per-tenant freshness section: the
// busiest tenants first, the untenanted account named, staleness rounded.
func TestDashboardRendersTenantSection(t *testing.T) {
	d := newDashboard(pipelines.DefaultOutputs)
	rows := topTenants(map[string]processor.TenantStats{
		"seller-002": {Outputs: 50, StalenessP50: 12 * time.Millisecond, StalenessP99: 80400 * time.Microsecond},
		"seller-001": {Outputs: 900, StalenessP50: 20 * time.Millisecond, StalenessP99: 95 * time.Millisecond},
		"":           {Outputs: 7, StalenessP50: time.Millisecond, StalenessP99: 2 * time.Millisecond},
		"seller-003": {Outputs: 50, StalenessP50: time.Millisecond, StalenessP99: 3 * time.Millisecond},
	}, 3)
	var out bytes.Buffer
	d.render(&out, snapshot{tenants: rows, tenantCount: 4}, pipelines.DefaultOutputs, "", "")
	got := out.String()
	want := regexp.MustCompile(`(?s)per-tenant freshness \(top 3 of 4 tenants.*\n\s+tenant\s+outputs\s+p50\s+p99\n` +
		`\s+seller-001\s+900\s+20ms\s+95ms\n\s+seller-002\s+50\s+12ms\s+80ms\n\s+seller-003\s+50\s+1ms\s+3ms\n`)
	if !want.MatchString(got) {
		t.Errorf("dashboard has no per-tenant section with the busiest tenants first:\n%s", got)
	}
	if strings.Contains(got, "(untenanted)") {
		t.Errorf("the 4th busiest account is listed though the section shows the top 3:\n%s", got)
	}
	if s := tenantSummary(topTenants(map[string]processor.TenantStats{"": {Outputs: 1}}, 3)); !strings.Contains(s, "(untenanted) 1 outputs") {
		t.Errorf("summary of the untenanted account: %q", s)
	}
}
