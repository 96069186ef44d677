package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// outputsWith returns outputs of one partition, 100 per second of input
// send time over [now−20s, now), each with the staleness stale(age) where
// age is how long before now its input was sent.
func outputsWith(now time.Time, stale func(age time.Duration) time.Duration) *outputs {
	o := &outputs{}
	for i := range 2000 {
		age := time.Duration(2000-i) * 10 * time.Millisecond
		ts := now.Add(-age)
		o.recs = append(o.recs, observed{partition: 1, ts: ts, recv: ts.Add(stale(age))})
	}
	return o
}

func TestIsSettled(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		stale func(age time.Duration) time.Duration
		want  bool
	}{
		{"flat", func(time.Duration) time.Duration { return 40 * time.Millisecond }, true},
		{"noise within the tolerance", func(age time.Duration) time.Duration {
			return time.Duration(40+int(age/time.Second)%3) * time.Millisecond
		}, true},
		// The failover run of 2026-12-03 11:32: the load's after-effects
		// decaying from 2 s to 0.4 s over the steady window.
		{"decaying after the load", func(age time.Duration) time.Duration { return 300*time.Millisecond + age/10 }, false},
		{"rising", func(age time.Duration) time.Duration { return 2*time.Second - age/10 }, false},
		{"too stale to judge", func(time.Duration) time.Duration { return 2900 * time.Millisecond }, false},
	}
	for _, c := range cases {
		got, why := isSettled(outputsWith(now, c.stale), now)
		if got != c.want {
			t.Errorf("%s: settled %v (%s), want %v", c.name, got, why, c.want)
		}
	}
	if got, why := isSettled(&outputs{}, now); got || !strings.Contains(why, "0, 0 outputs") {
		t.Errorf("no outputs: settled %v (%s)", got, why)
	}
}

func TestFailoverMarkdownMinMedian(t *testing.T) {
	r := &FailoverReport{Keys: 1000, Repeats: 3, Results: []FailoverResult{
		{Case: "x", Keys: 1000, Repeat: 1, TakeoverSec: 3, TotalSec: 9, SteadyP99: 100, TakeoverP99: 110},
		{Case: "y", Keys: 10, Repeat: 1, Error: "boom"},
		{Case: "x", Keys: 1000, Repeat: 2, TakeoverSec: 1, TotalSec: 7, SteadyP99: 50, TakeoverP99: 100},
		{Case: "x", Keys: 1000, Repeat: 3, TakeoverSec: 2, TotalSec: 8, SteadyP99: 80, TakeoverP99: 80},
	}}
	var b strings.Builder
	r.Markdown(&b)
	md := b.String()
	for _, want := range []string{
		"| x | 1000 | 3/3 | 0.00 | 1.00 / 2.00 | 7.00 / 8.00 | 0 | 50.0 / 80.0 | 80.0 / 100.0 | 1.00 / 1.10 |",
		"| y | 10 | 0/1 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestDumpOutputsWritesTheRunAroundTheKill: with TIDEMARK_BENCH_OUTPUTS set,
// a run leaves one line per output whose input was sent from 3 s before
// the kill to the window's end, timed from the kill.
func TestDumpOutputsWritesTheRunAroundTheKill(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(outputsEnv, dir)
	kill := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	o := &outputs{recs: []observed{
		{partition: 0, offset: 7, ts: kill.Add(-5 * time.Second), recv: kill.Add(-4 * time.Second)},
		{partition: 2, offset: 9, ts: kill.Add(-time.Second), recv: kill.Add(-950 * time.Millisecond)},
		{partition: 3, offset: 4, ts: kill.Add(time.Second), recv: kill.Add(1500 * time.Millisecond)},
		{partition: 1, offset: 5, ts: kill.Add(4 * time.Second), recv: kill.Add(5 * time.Second)},
	}}
	if err := dumpOutputs(o, "tidemark-standby", kill, kill.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tidemark-standby-20261205-040000.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{"2 9 -1.000 -0.950 50.0", "3 4 1.000 1.500 500.0"}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# kill 2026-12-05T04:00:00Z") || strings.Join(lines[1:], "|") != strings.Join(want, "|") {
		t.Fatalf("dump:\n%s\nwant a header and %q", b, want)
	}
}
