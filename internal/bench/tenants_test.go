package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// TestTenantBurstMeasuresEveryTenantBothModes runs a miniature tenant burst
// on the real broker, isolation off then on: every tenant gets a p99 in
// every window, and every input sent in a window has its output seen (the
// drain waits for the app to commit the input's end).
func TestTenantBurstMeasuresEveryTenantBothModes(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.RunTenants(ctx, bench.TenantOptions{
		Brokers: brokers, Tenants: 4, Rate: 800, BurstFactor: 5,
		Warmup: 2 * time.Second, FirstWarmup: time.Second, Before: 3 * time.Second, Burst: 3 * time.Second, After: time.Second,
		Partitions: 3, KeysPerTenant: 50, WorkDir: t.TempDir(),
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	logReport(t, md.String())
	if len(rep.Runs) != 2 || rep.Runs[0].Mode != "off" || rep.Runs[1].Mode != "on" {
		t.Fatalf("runs %+v, want off then on", rep.Runs)
	}
	for _, run := range rep.Runs {
		if run.Error != "" {
			t.Fatalf("isolation %s: %s", run.Mode, run.Error)
		}
		if len(run.Tenants) != 4 {
			t.Errorf("isolation %s: %d tenants, want 4", run.Mode, len(run.Tenants))
		}
		for tenant, ws := range run.Tenants {
			for _, win := range []string{bench.WindowBefore, bench.WindowDuring} {
				w := ws[win]
				if w.Inputs == 0 || w.Outputs != w.Inputs || w.P99 <= 0 || w.P99 < w.P50 {
					t.Errorf("isolation %s, %s %s: %+v, want every input's output seen and p99 ≥ p50 > 0", run.Mode, tenant, win, w)
				}
			}
		}
		// The hot tenant sends 5× its steady rate during the burst.
		hot := run.Tenants["t00"]
		if got, quiet := hot[bench.WindowDuring].Inputs, run.Tenants["t01"][bench.WindowDuring].Inputs; got < 4*quiet {
			t.Errorf("isolation %s: hot tenant sent %d during the burst, quiet %d: want ~5×", run.Mode, got, quiet)
		}
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tenants.json", "tenants.md"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
}
