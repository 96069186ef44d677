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

func TestMain(m *testing.M) {
	bench.MaybeRunWorker() // the harness re-runs this test binary as its workers
	os.Exit(m.Run())
}

// TestHarnessMeasuresRawSystems runs a miniature benchmark of the raw
// systems end to end on the real broker: worker processes, throughput from
// group progress, staleness from an external read_committed consumer.
func TestHarnessMeasuresRawSystems(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		Brokers:        brokers,
		Workloads:      []string{"stateless"},
		Systems:        []bench.System{{Name: "raw", Kind: "raw"}, {Name: "raw-txn", Kind: "raw-txn"}},
		Records:        200_000,
		Keys:           100,
		Partitions:     2,
		SweepWorkloads: []string{"stateless"},
		SweepFractions: []float64{0.1},
		// A warmup long enough for a transactional worker to start on a
		// loaded machine (its producer id and first transaction can take
		// seconds there): with 1s, raw-txn once had no output in the window.
		Warmup:  4 * time.Second,
		Measure: 2 * time.Second,
		WorkDir: t.TempDir(),
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	logReport(t, md.String())
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Fatalf("%s %s %s: %s", r.Phase, r.System, r.Workload, r.Error)
		}
		switch r.Phase {
		case "max":
			if r.Throughput <= 0 || r.CPUSeconds <= 0 || r.PeakRSSMiB <= 0 {
				t.Errorf("%s: incomplete max measurement %+v", r.System, r)
			}
		case "rate":
			// Outputs stamped after the warmup: up to rate × measure, fewer
			// when a loaded machine makes the system lag past the watch.
			want := r.Rate * 2
			if float64(r.Outputs) < want*0.3 || float64(r.Outputs) > want*1.2 || r.P50 <= 0 || r.P99 < r.P50 {
				t.Errorf("%s: staleness measurement %+v, want ~%.0f outputs with p99 ≥ p50 > 0", r.System, r, want)
			}
		}
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "results.md", "staleness-stateless.svg"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
}

// logReport logs a rendered report with -v only. A failing run prints its
// progress lines anyway; the report on top of them is long enough that a
// CI log cut to its head and tail loses the failure messages after it.
func logReport(t *testing.T, md string) {
	t.Helper()
	if testing.Verbose() {
		t.Log("\n" + md)
	}
}
