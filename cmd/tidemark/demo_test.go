package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
}
