package bench_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// TestSweepQuickMeasuresEveryPhase runs a quick freshness sweep on the real
// broker with two tidemark policies (Kafka Streams is left out: its peer
// needs a Maven build; `bench sweep --quick` covers it): the calibrations
// give capacities, each run has its SIGKILL and restart, every phase of
// every run has count outputs with staleness, goodput, window finals and
// commits, the targets are computed, and the files are written.
func TestSweepQuickMeasuresEveryPhase(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := benchTopics(ctx, t, brokers)
	policies := bench.DefaultSweepPolicies()
	rep, err := bench.RunSweep(ctx, bench.SweepOptions{
		Brokers:      brokers,
		Policies:     []bench.System{policies[0], policies[3]}, // adaptive, fixed 50 ms
		Quick:        true,
		CountRecords: 50_000, SweepRecords: 50_000, WarmRecords: 10_000,
		Keys:    2000,
		WorkDir: t.TempDir(),
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	logReport(t, md.String())
	if rep.Seed == 0 || rep.Capacity <= 0 || len(rep.Loads) != 5 {
		t.Fatalf("report header %+v", rep)
	}
	want := map[string]bool{"tidemark-adaptive/count": false, "raw-txn/stateless": false, "tidemark-adaptive/sweep": false}
	for _, c := range rep.Calibrations {
		if c.Error != "" || c.Throughput <= 0 || c.AppCPUPerRecordUs <= 0 {
			t.Errorf("calibration %+v", c)
		}
		want[c.System+"/"+c.Workload] = true
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no calibration %s", k)
		}
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Policy != "tidemark-adaptive" || rep.Runs[1].Policy != "tidemark-fixed-50ms" {
		t.Fatalf("runs %+v, want adaptive then fixed-50ms", rep.Runs)
	}
	for _, run := range rep.Runs {
		if run.Error != "" {
			t.Fatalf("%s: %s", run.Policy, run.Error)
		}
		if run.KillAtSec <= 0 || run.RestartSec <= 0 {
			t.Errorf("%s: kill at %.1f s, restart %.2f s: want both", run.Policy, run.KillAtSec, run.RestartSec)
		}
		if len(run.Phases) != 5 {
			t.Fatalf("%s: %d phases, want 5", run.Policy, len(run.Phases))
		}
		for _, ph := range run.Phases {
			// A quick run's phases are 2 s: the SIGKILL 1.2 s into phase 3
			// and a restart of a few seconds on a loaded machine may leave
			// phase 3 and the next without a worker long enough to commit
			// (and so to make outputs visible).
			from := run.WarmupSec + float64(ph.Phase-1)*rep.PhaseSec
			upFor := from + rep.PhaseSec - max(from, run.KillAtSec+run.RestartSec)
			working := ph.Phase < 3 || ph.Phase > 3 && upFor >= 0.5
			if ph.Inputs <= 0 || ph.Outputs <= 0 || ph.P50 <= 0 || ph.P99 < ph.P50 {
				t.Errorf("%s phase %d: %+v, want inputs, count outputs and staleness", run.Policy, ph.Phase, ph)
			}
			if ph.Finals <= 0 || ph.CloseP99 < ph.CloseP50 || ph.AppCPUSec <= 0 {
				t.Errorf("%s phase %d: %+v, want window finals and CPU", run.Policy, ph.Phase, ph)
			}
			if working && (ph.CommitsPerSec <= 0 || ph.Goodput <= 0) {
				t.Errorf("%s phase %d: %.1f commits/s, goodput %.0f/s, with a worker up for %.1f s of it: want both", run.Policy, ph.Phase, ph.CommitsPerSec, ph.Goodput, upFor)
			}
		}
	}
	// Per phase a comparison with the best fixed interval and a
	// close→visible check (n/a where p99s are censored lower bounds), and
	// the raw-txn ratio computed: whatever they say.
	per := map[string]int{}
	for _, tc := range rep.Targets {
		if tc.Status != "PASS" && tc.Status != "MISS" && tc.Status != "n/a" {
			t.Errorf("target %+v: status %q", tc, tc.Status)
		}
		for _, prefix := range []string{"adaptive p99 ≤ 1.10", "adaptive window close→visible"} {
			if strings.HasPrefix(tc.Target, prefix) {
				per[prefix]++
			}
		}
		if strings.HasPrefix(tc.Target, "count max throughput ≥ 0.7") && tc.Status == "n/a" {
			t.Errorf("raw-txn ratio not computed: %+v", tc)
		}
	}
	for prefix, n := range per {
		if n != 5 {
			t.Errorf("%d targets %q, want one per phase", n, prefix)
		}
	}
	if len(per) != 2 {
		t.Errorf("per-phase targets %v, want both kinds", per)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sweep.json", "sweep.md", "sweep-staleness-p99.svg", "sweep-close-visible-p99.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back bench.SweepReport
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 2 || len(back.Targets) != len(rep.Targets) {
		t.Errorf("sweep.json does not round-trip: %v", err)
	}
	checkTopicsDeleted(ctx, t, brokers, before)
}

// benchTopics are the broker's topics that a benchmark run creates.
func benchTopics(ctx context.Context, t *testing.T, brokers []string) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, name := range listed.Names() {
		if strings.HasPrefix(name, "bench-") {
			out[name] = true
		}
	}
	return out
}

// checkTopicsDeleted fails unless every benchmark topic created since
// before is gone within 20 s: a run that leaves its inputs and outputs
// behind fills the broker with partitions and data that slow every run
// after it.
func checkTopicsDeleted(ctx context.Context, t *testing.T, brokers []string, before map[string]bool) {
	t.Helper()
	var left []string
	for range 40 {
		left = left[:0]
		for name := range benchTopics(ctx, t, brokers) {
			if !before[name] {
				left = append(left, name)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	slices.Sort(left)
	t.Errorf("topics the sweep created are still there: %v", left)
}
