package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func testSchedule() sweepSchedule {
	return sweepSchedule{capacity: 1000, loads: DefaultSweepLoads, warmup: 5 * time.Second, phase: 20 * time.Second, killPhase: 2, killFrac: 0.6}
}

func TestSweepSchedulePhases(t *testing.T) {
	s := testSchedule()
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want int
		rate float64
	}{
		{0, -1, 100}, {4999 * time.Millisecond, -1, 100}, {5 * time.Second, 0, 100}, {24 * time.Second, 0, 100},
		{25 * time.Second, 1, 500}, {45 * time.Second, 2, 900}, {65 * time.Second, 3, 500}, {85 * time.Second, 4, 100},
		{105 * time.Second, 5, 0}, {time.Hour, 5, 0},
	} {
		if got := s.phaseOf(c.at); got != c.want {
			t.Errorf("phaseOf(%s) = %d, want %d", c.at, got, c.want)
		}
		if got := s.rate(c.at); got != c.rate {
			t.Errorf("rate(%s) = %v, want %v", c.at, got, c.rate)
		}
	}
	if got, want := s.end(), 105*time.Second; got != want {
		t.Errorf("end %s, want %s", got, want)
	}
	// 60% into phase 3: 5 s + 2 × 20 s + 12 s.
	if got, want := s.killAt(), 57*time.Second; got != want {
		t.Errorf("killAt %s, want %s", got, want)
	}
}

// due is the integral of the rate: 500 in the warm-up, then 2000, 10000,
// 18000, 10000, 2000 per phase; nothing after the end.
func TestSweepScheduleDueIsTheRateIntegral(t *testing.T) {
	s := testSchedule()
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{
		{0, 0}, {time.Second, 100}, {5 * time.Second, 500}, {15 * time.Second, 1500}, {25 * time.Second, 2500},
		{35 * time.Second, 7500}, {45 * time.Second, 12500}, {65 * time.Second, 30500}, {85 * time.Second, 40500},
		{105 * time.Second, 42500}, {time.Hour, 42500},
	} {
		if got := s.due(c.at); got != c.want {
			t.Errorf("due(%s) = %d, want %d", c.at, got, c.want)
		}
	}
	// Monotone, and the step between two instants is the rate there.
	var last int64
	for d := time.Duration(0); d <= s.end(); d += 100 * time.Millisecond {
		n := s.due(d)
		if n < last {
			t.Fatalf("due decreases at %s: %d < %d", d, n, last)
		}
		if d > 0 && s.phaseOf(d-100*time.Millisecond) == s.phaseOf(d) {
			if step := float64(n - last); math.Abs(step-s.rate(d)/10) > 1 {
				t.Fatalf("due step at %s = %v, want rate/10 = %v", d, step, s.rate(d)/10)
			}
		}
		last = n
	}
}

func TestSweepScheduleValidate(t *testing.T) {
	for name, mut := range map[string]func(*sweepSchedule){
		"no loads":    func(s *sweepSchedule) { s.loads = nil },
		"zero load":   func(s *sweepSchedule) { s.loads = []float64{0.5, 0} },
		"no phase":    func(s *sweepSchedule) { s.phase = 0 },
		"kill beyond": func(s *sweepSchedule) { s.killPhase = 5 },
		"kill frac 1": func(s *sweepSchedule) { s.killFrac = 1 },
	} {
		s := testSchedule()
		mut(&s)
		if s.validate() == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

// The skew is backwards only, at most max, in whole milliseconds, spread
// over the range, and the same sequence for the same seed.
func TestSweepSkew(t *testing.T) {
	const max = 5 * time.Second
	a, b := newSkewer(42, max), newSkewer(42, max)
	now := time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)
	var lo, hi time.Duration = max, 0
	var buckets [5]int
	for range 20000 {
		ts := a.stamp(now)
		if !ts.Equal(b.stamp(now)) {
			t.Fatal("same seed, different skew")
		}
		back := now.Sub(ts)
		if back < 0 || back > max+time.Millisecond || ts.Nanosecond()%int(time.Millisecond) != 0 {
			t.Fatalf("stamp %s for %s: %s back, want 0..%s in whole ms", ts, now, back, max)
		}
		lo, hi = min(lo, back), maxDur(hi, back)
		buckets[min(4, int(back/time.Second))]++
	}
	if lo > 50*time.Millisecond || hi < max-50*time.Millisecond {
		t.Errorf("skew spans %s..%s, want about 0..%s", lo, hi, max)
	}
	for i, n := range buckets {
		if n < 3000 || n > 5000 { // uniform: ~4000 per second of skew
			t.Errorf("skew second %d has %d of 20000 records, want ~4000", i, n)
		}
	}
	if ts := newSkewer(1, 0).stamp(now); !ts.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("no skew: %s, want %s", ts, now.Truncate(time.Millisecond))
	}
	c := newSkewer(43, max)
	same := 0
	for range 100 {
		if a.stamp(now).Equal(c.stamp(now)) {
			same++
		}
	}
	if same > 10 {
		t.Errorf("different seeds, %d of 100 equal stamps", same)
	}
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func TestInputBookLooksUpProduceAndCloseTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	ks := newZipfKeyspace(1, 10, sweepZipf)
	b := newInputBook(start, ks.keys, 2)
	if b.partOf[0] == b.partOf[1] && b.partOf[1] == b.partOf[2] && b.partOf[2] == b.partOf[3] {
		t.Fatalf("keys not spread over partitions: %v", b.partOf)
	}
	k, other := 0, -1
	for i, p := range b.partOf {
		if p != b.partOf[k] {
			other = i
			break
		}
	}
	ms := func(n int64) time.Time { return time.UnixMilli(n) }
	b.add(k, start.Add(10*time.Millisecond), ms(5000))
	b.add(k, start.Add(20*time.Millisecond), ms(4000)) // late: no new step
	b.add(k, start.Add(30*time.Millisecond), ms(7000))
	b.add(other, start.Add(40*time.Millisecond), ms(9000)) // other partition
	if at, ok := b.produced(k, 2); !ok || at != 20*time.Millisecond {
		t.Errorf("produced(k, 2) = %s %v, want 20ms", at, ok)
	}
	if _, ok := b.produced(k, 4); ok {
		t.Error("produced(k, 4) found, want not")
	}
	p := b.partOf[k]
	for _, c := range []struct {
		ts   int64
		want time.Duration
		ok   bool
	}{{4500, 10 * time.Millisecond, true}, {5000, 10 * time.Millisecond, true}, {6000, 30 * time.Millisecond, true}, {7001, 0, false}} {
		at, ok := b.closedAt(p, c.ts)
		if ok != c.ok || at != c.want {
			t.Errorf("closedAt(%d) = %s %v, want %s %v", c.ts, at, ok, c.want, c.ok)
		}
	}
	if at, ok := b.closedAt(b.partOf[other], 8000); !ok || at != 40*time.Millisecond {
		t.Errorf("other partition closedAt(8000) = %s %v, want 40ms", at, ok)
	}
}

func TestKeyIndexAndCount(t *testing.T) {
	if k, _, w, ok := keyIndex([]byte("sku-000123")); !ok || w || k != 123 {
		t.Errorf("sku-000123: %d %v %v", k, w, ok)
	}
	if k, st, w, ok := keyIndex([]byte("sku-000007@1764763200000")); !ok || !w || k != 7 || st != 1764763200000 {
		t.Errorf("windowed key: %d %d %v %v", k, st, w, ok)
	}
	for _, bad := range []string{"", "x-1", "sku-", "sku-1@x"} {
		if _, _, _, ok := keyIndex([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if n, err := parseCount([]byte("4711")); err != nil || n != 4711 {
		t.Errorf("parseCount: %d %v", n, err)
	}
	if _, err := parseCount([]byte("-1")); err == nil {
		t.Error("parseCount(-1) accepted")
	}
}

func TestCommitsBetweenSumsProcessesAcrossTheRestart(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	before := []commitSample{{at(1), 10, 20}, {at(2), 20, 30}, {at(3), 30, 40}}
	after := []commitSample{{at(4), 2, 50}, {at(5), 12, 60}} // a new process counts from 0
	c, lat := commitsBetween([][]commitSample{before, after}, at(1.5), at(5.5))
	if c != 20+12 {
		t.Errorf("commits %v, want 32 (20 before the kill, 12 after)", c)
	}
	if lat != 45 { // median of 30, 40, 50, 60
		t.Errorf("median latency %v, want 45", lat)
	}
}

// sweepReportOf builds a report with one run per policy whose phases have
// the given p99s and goodputs.
func sweepReportOf(loads []float64, p99 map[string][]float64, goodput map[string][]float64) *SweepReport {
	r := &SweepReport{Loads: loads, Capacity: 1000}
	for _, name := range []string{"tidemark-adaptive", "tidemark-fixed-10ms", "tidemark-fixed-100ms", "kstreams-100ms"} {
		ps, ok := p99[name]
		if !ok {
			continue
		}
		run := SweepRun{Policy: name, Repeat: 1}
		for k := range loads {
			g := 1000 * loads[k]
			if goodput[name] != nil {
				g = goodput[name][k]
			}
			run.Phases = append(run.Phases, SweepPhase{Phase: k + 1, Load: loads[k], Rate: 1000 * loads[k], Outputs: 100, Inputs: 100,
				P99: ps[k], P50: ps[k] / 2, Goodput: g, Finals: 10, CloseP99: 60, AppCloseP99: 40, CommitLatencyMs: 30})
		}
		r.Runs = append(r.Runs, run)
	}
	return r
}

func find(ts []TargetCheck, target, scope string) (TargetCheck, bool) {
	for _, t := range ts {
		if strings.HasPrefix(t.Target, target) && t.Scope == scope {
			return t, true
		}
	}
	return TargetCheck{}, false
}

func TestSweepTargetsAdaptiveAgainstBestFixed(t *testing.T) {
	loads := []float64{0.1, 0.9}
	r := sweepReportOf(loads, map[string][]float64{
		"tidemark-adaptive":    {54, 200},
		"tidemark-fixed-10ms":  {50, 5000}, // best at 10%, falls behind at 90%
		"tidemark-fixed-100ms": {150, 180},
	}, map[string][]float64{
		"tidemark-adaptive":    {100, 900},
		"tidemark-fixed-10ms":  {100, 400}, // goodput < 0.95 × top: not a candidate at 90%
		"tidemark-fixed-100ms": {100, 900},
	})
	r.FetchFloorMs = 5
	ts := r.checkTargets()
	p1, ok := find(ts, "adaptive p99 ≤ 1.10", "phase 1 (10%)")
	if !ok || p1.Status != "PASS" || math.Abs(p1.Value-54.0/50) > 1e-9 || !strings.Contains(p1.Detail, "tidemark-fixed-10ms") {
		t.Errorf("phase 1: %+v, want PASS at 1.08 against fixed-10ms", p1)
	}
	p2, ok := find(ts, "adaptive p99 ≤ 1.10", "phase 2 (90%)")
	if !ok || p2.Status != "MISS" || math.Abs(p2.Value-200.0/180) > 1e-9 || !strings.Contains(p2.Detail, "tidemark-fixed-100ms") {
		t.Errorf("phase 2: %+v, want MISS at 1.11 against fixed-100ms (fixed-10ms's goodput disqualifies it)", p2)
	}
	// Each fixed interval misses somewhere: 10ms at 90%, 100ms at 10%.
	for _, f := range []string{"tidemark-fixed-10ms", "tidemark-fixed-100ms"} {
		if c, ok := find(ts, "fixed interval misses", f); !ok || c.Status != "PASS" {
			t.Errorf("%s: %+v, want PASS (it misses at some phase)", f, c)
		}
	}
	// Window finals, in app: 40 ms ≤ 30 + 5? No. The external 60 ms is
	// in the detail only.
	if c, ok := find(ts, "adaptive window close→visible", "phase 1 (10%)"); !ok || c.Status != "MISS" || c.Limit != 35 || c.Value != 40 ||
		!strings.Contains(c.Detail, "produce time 60.0 ms") {
		t.Errorf("close→visible: %+v, want MISS at 40 against 35 ms", c)
	}
	// A goodput shortfall alone misses too.
	r = sweepReportOf(loads, map[string][]float64{
		"tidemark-adaptive": {50, 100}, "tidemark-fixed-100ms": {100, 200},
	}, map[string][]float64{"tidemark-adaptive": {100, 800}, "tidemark-fixed-100ms": {100, 900}})
	if c, _ := find(r.checkTargets(), "adaptive p99 ≤ 1.10", "phase 2 (90%)"); c.Status != "MISS" {
		t.Errorf("goodput 0.89 × best fixed: %+v, want MISS", c)
	}
	// Goodput above the input rate is an earlier overload's backlog
	// draining: a fixed interval still catching up (300/s at 100/s input)
	// does not make the adaptive policy, caught up at 100/s, miss.
	r = sweepReportOf(loads, map[string][]float64{
		"tidemark-adaptive": {50, 100}, "tidemark-fixed-100ms": {5000, 200},
	}, map[string][]float64{"tidemark-adaptive": {100, 900}, "tidemark-fixed-100ms": {300, 900}})
	if c, _ := find(r.checkTargets(), "adaptive p99 ≤ 1.10", "phase 1 (10%)"); c.Status != "PASS" || !strings.Contains(c.Detail, "goodput ratio 1.000") {
		t.Errorf("fixed draining a backlog at 3 × the input rate: %+v, want PASS with served goodput ratio 1.000", c)
	}
}

func TestSweepTargetsAgainstKafkaStreams(t *testing.T) {
	loads := []float64{0.1, 0.5, 0.9}
	r := sweepReportOf(loads, map[string][]float64{
		"tidemark-adaptive": {40, 120, 300}, "tidemark-fixed-100ms": {150, 160, 400}, "kstreams-100ms": {100, 200, 2000},
	}, nil)
	r.Calibrations = []SweepCalibration{
		{System: "kstreams-100ms", Workload: "sweep", Throughput: 700}, // 80%: 560/s
		{System: "tidemark-adaptive", Workload: "count", Throughput: 3000, AppCPUPerRecordUs: 5, BrokerCPUPerRecordUs: 3},
		{System: "kstreams-100ms", Workload: "count", Throughput: 1000, AppCPUPerRecordUs: 9, BrokerCPUPerRecordUs: 2},
		{System: "raw-txn", Workload: "stateless", Throughput: 5000},
	}
	r.BrokerPID = 1
	ts := r.checkTargets()
	if c, _ := find(ts, "adaptive p99 ≤ 0.5 × Kafka Streams", "phase 1 (10%)"); c.Status != "PASS" || c.Value != 0.4 {
		t.Errorf("phase 1 vs KS: %+v, want PASS 0.40", c)
	}
	if c, _ := find(ts, "adaptive p99 ≤ 0.5 × Kafka Streams", "phase 2 (50%)"); c.Status != "MISS" || c.Value != 0.6 {
		t.Errorf("phase 2 vs KS: %+v, want MISS 0.60", c)
	}
	if c, _ := find(ts, "adaptive p99 ≤ 0.5 × Kafka Streams", "phase 3 (90%)"); c.Status != "n/a" {
		t.Errorf("phase 3 (900/s > 560/s) vs KS: %+v, want n/a", c)
	}
	if c, _ := find(ts, "count max throughput ≥ 2.5", "calibration"); c.Status != "PASS" || c.Value != 3 {
		t.Errorf("throughput vs KS: %+v, want PASS 3.0", c)
	}
	if c, _ := find(ts, "count max throughput ≥ 0.7", "calibration"); c.Status != "MISS" || c.Value != 0.6 {
		t.Errorf("throughput vs raw-txn: %+v, want MISS 0.60", c)
	}
	if c, _ := find(ts, "app + broker CPU", "count calibration"); c.Status != "PASS" || c.Value != 8 || c.Limit != 11 {
		t.Errorf("CPU: %+v, want PASS 8 ≤ 11", c)
	}
	// Markdown and SVG render every policy and verdict.
	var md, svg strings.Builder
	r.Targets = ts
	r.Markdown(&md)
	r.SVG(&svg, "p99", func(p SweepPhase) float64 { return p.P99 })
	for _, want := range []string{"| 3 | 90% | 900 | kstreams-100ms |", "PASS", "MISS", "n/a"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, want := range []string{"tidemark-adaptive", "kstreams-100ms", "<polyline"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

// Repeats: a phase's figure is the median over the runs of the policy.
func TestSweepPhaseIsMedianOverRepeats(t *testing.T) {
	r := &SweepReport{Loads: []float64{0.5}}
	for i, p99 := range []float64{300, 100, 200} {
		r.Runs = append(r.Runs, SweepRun{Policy: "tidemark-adaptive", Repeat: i + 1, Phases: []SweepPhase{{Phase: 1, P99: p99, Outputs: 1}}})
	}
	r.Runs = append(r.Runs, SweepRun{Policy: "tidemark-adaptive", Repeat: 4, Error: "boom", Phases: []SweepPhase{{Phase: 1, P99: 1e6}}})
	if ph, ok := r.phase("tidemark-adaptive", 0); !ok || ph.P99 != 200 {
		t.Errorf("median p99 %v, want 200 (the failed run left out)", ph.P99)
	}
}

// Inputs that no visible output covers by the end count in the quantiles
// with the time until the watcher stopped, so a system still behind does
// not look fresher than one that caught up.
func TestSweepObserverCountsUnseenInputs(t *testing.T) {
	sch := sweepSchedule{capacity: 10, loads: []float64{1}, warmup: 0, phase: 10 * time.Second, killFrac: 0.5}
	start := time.Unix(1000, 0)
	ks := newZipfKeyspace(1, 2, sweepZipf)
	b := newInputBook(start, ks.keys, 1)
	for i := range 4 { // key 0 at 1, 2, 3, 4 s
		b.add(0, start.Add(time.Duration(i+1)*time.Second), start)
	}
	o := newSweepObserver(sch, b, 0)
	// The output for count 2 seen at 2.5 s: staleness 0.5 s; inputs 3 and
	// 4 never covered, the watcher stops at 12 s: 9 s and 8 s.
	o.outputs[0]++
	_ = o.stale[0].RecordValue((500 * time.Millisecond).Microseconds())
	o.maxSeen[0] = 2
	o.stopped = 12 * time.Second
	ph := o.phases(start, func(time.Time, time.Time) (float64, float64, time.Duration, time.Duration) { return 0, 0, 0, 0 }, false)
	if len(ph) != 1 || ph[0].Inputs != 4 || ph[0].Outputs != 1 || ph[0].Unseen != 2 {
		t.Fatalf("phase %+v, want 4 inputs, 1 output, 2 unseen", ph)
	}
	if math.Abs(ph[0].P99-9000) > 10 || math.Abs(ph[0].P50-8000) > 10 {
		t.Errorf("p50 %.0f ms, p99 %.0f ms: want 8000 and 9000 (the unseen inputs' time until the end)", ph[0].P50, ph[0].P99)
	}
}

// A phase with unseen inputs has a p99 that is a lower bound: only the
// certain verdicts are given.
func TestSweepTargetsCensoredP99(t *testing.T) {
	for _, c := range []struct {
		v            float64
		aCens, bCens bool
		want         string
	}{
		{1.0, false, false, "PASS"}, {1.2, false, false, "MISS"},
		{1.2, true, false, "MISS"}, {1.0, true, false, "n/a"},
		{1.0, false, true, "PASS"}, {1.2, false, true, "n/a"},
		{1.0, true, true, "n/a"}, {1.2, true, true, "n/a"},
	} {
		if got := atMost(c.v, 1.1, c.aCens, c.bCens); got != c.want {
			t.Errorf("atMost(%v, censored %v/%v) = %s, want %s", c.v, c.aCens, c.bCens, got, c.want)
		}
	}
	loads := []float64{0.5}
	r := sweepReportOf(loads, map[string][]float64{"tidemark-adaptive": {1000}, "tidemark-fixed-100ms": {1000}}, nil)
	r.Runs[0].Phases[0].Unseen, r.Runs[1].Phases[0].Unseen = 5, 5
	if c, _ := find(r.checkTargets(), "adaptive p99 ≤ 1.10", "phase 1 (50%)"); c.Status != "n/a" || !strings.Contains(c.Detail, "unseen") {
		t.Errorf("both behind: %+v, want n/a", c)
	}
}
