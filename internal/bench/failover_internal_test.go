package bench

import (
	"encoding/json"
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
		"| x | 1000 | 3/3 | 0.00 | 1.00 / 2.00 | 7.00 / 8.00 | 0 | 50.0 / 80.0 | 80.0 / 100.0 | 1.00 / 1.10 |  |  |",
		"| y | 10 | 0/1 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// runMs is a window of outputs: n at each staleness (ms) in stale.
func runMs(n int, stale ...int64) msCounts {
	m := map[int64]int64{}
	for _, ms := range stale {
		for range n {
			countMs(m, time.Duration(ms)*time.Millisecond+400*time.Microsecond)
		}
	}
	return newMsCounts(m)
}

// TestFailoverPooledP99: the pooled p99 is the p99 of all runs' outputs
// together, not a summary of per-run p99s. Two of three runs' restore
// windows have a stall (3 of their 200 outputs at 500 ms, so their own p99
// is 500 ms, the median run's ratio 50); pooled, the stalls are 1% of the
// outputs and the pooled ratio is 1. A stall of 5% of every run's window
// shows in the pooled p99 as well.
func TestFailoverPooledP99(t *testing.T) {
	calm := func(r int) FailoverResult {
		return FailoverResult{Case: "x", Keys: 1000, Repeat: r, SteadyP99: 10, TakeoverP99: 10,
			SteadyMs: runMs(100, 8, 10), TakeoverMs: runMs(100, 9, 10)}
	}
	stalled := func(r int) FailoverResult {
		x := calm(r)
		x.TakeoverP99 = 500
		x.TakeoverMs = pool(runMs(1, 500, 500, 500), runMs(197, 10))
		return x
	}
	r := &FailoverReport{Keys: 1000, Repeats: 3, Results: []FailoverResult{calm(1), stalled(2), stalled(3),
		{Case: "x", Keys: 1000, Repeat: 4, Error: "boom", SteadyMs: runMs(1000, 1), TakeoverMs: runMs(1000, 900)}}}
	s, tk, runs := pooledP99(r.Results)
	if s != 10 || tk != 10 || runs != 3 {
		t.Errorf("pooled p99 steady %v, restore window %v over %d runs; want 10, 10 over 3 (the failed run left out)", s, tk, runs)
	}
	var b strings.Builder
	r.Markdown(&b)
	if want := "| 10 / 10 | 1.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}

	var slow []FailoverResult
	for i := range 3 {
		x := calm(i + 1)
		x.TakeoverMs = pool(runMs(10, 300), runMs(190, 10))
		slow = append(slow, x)
	}
	if _, tk, _ := pooledP99(slow); tk != 300 {
		t.Errorf("a stall in 5%% of every window: pooled p99 %v ms, want 300", tk)
	}
	if q := (msCounts{}).quantile(99); q != 0 {
		t.Errorf("empty histogram: p99 %v, want 0", q)
	}
}

// TestFailoverMsCountsStoredCompactly: a report's staleness buckets are
// one line per run in results.json and read back to the same pooled p99;
// reports written before, with an array of pairs, still read.
func TestFailoverMsCountsStoredCompactly(t *testing.T) {
	r := &FailoverReport{Keys: 1000, Repeats: 1, Results: []FailoverResult{{Case: "x", Keys: 1000, Repeat: 1,
		SteadyMs: pool(runMs(5, 3), runMs(90, 12), runMs(5, 140)), TakeoverMs: pool(runMs(98, 20), runMs(2, 75))}}}
	dir := t.TempDir()
	if err := writeResults(dir, "results", r, r.Markdown); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"steady_ms_counts": "3:5 12:90 140:5"`) {
		t.Errorf("steady buckets not stored as one string:\n%s", b)
	}
	var back FailoverReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	s0, t0, _ := pooledP99(r.Results)
	s1, t1, runs := pooledP99(back.Results)
	if s0 != s1 || t0 != t1 || runs != 1 || s1 != 140 || t1 != 75 {
		t.Errorf("read back: pooled p99 %v / %v over %d runs, want %v / %v over 1 (140 / 75)", s1, t1, runs, s0, t0)
	}
	var old msCounts
	if err := json.Unmarshal([]byte(`[[3, 5], [12, 90]]`), &old); err != nil || len(old) != 2 || old[1] != [2]int64{12, 90} {
		t.Errorf("array of pairs: %v, %v", old, err)
	}
	var bad msCounts
	if err := json.Unmarshal([]byte(`"3:5 12"`), &bad); err == nil {
		t.Error("a bucket without its count was accepted")
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
