package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/processor"
)

// The schedule integrates each tenant's rate: steady tenants at r, the hot
// one at factor × r during the burst only, and windows go by send time.
func TestTenantScheduleDueAndWindows(t *testing.T) {
	o := TenantOptions{Warmup: 10 * time.Second, Before: 20 * time.Second, Burst: 60 * time.Second, After: 20 * time.Second}
	start := time.Unix(1000, 0)
	s := o.schedule(start)
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }
	for _, c := range []struct {
		sec  float64
		hot  bool
		want int
	}{
		{10, false, 1000}, {30, true, 3000}, {40, true, 3000 + 10*1000}, {90, true, 3000 + 60*1000},
		{100, true, 3000 + 60*1000 + 10*100}, {100, false, 100 * 100},
	} {
		if got := s.due(at(c.sec), 100, 10, c.hot); got != c.want {
			t.Errorf("due(%vs, hot=%v) = %d, want %d", c.sec, c.hot, got, c.want)
		}
	}
	for sec, want := range map[float64]string{5: "", 9.999: "", 10: WindowBefore, 29.9: WindowBefore, 30: WindowDuring,
		89.9: WindowDuring, 90: WindowAfter, 109.9: WindowAfter, 110: ""} {
		if got := s.window(at(sec)); got != want {
			t.Errorf("window(%vs) = %q, want %q", sec, got, want)
		}
	}
}

// The report gives each tenant's p99 before and during the burst and the
// rise, and the quiet tenants' largest rise (the hot tenant excluded).
func TestTenantReportMarkdown(t *testing.T) {
	w := func(before, during float64) map[string]TenantWindow {
		return map[string]TenantWindow{WindowBefore: {P99: before, Inputs: 10, Outputs: 10}, WindowDuring: {P99: during, Inputs: 20, Outputs: 20}}
	}
	withApp := func(ws map[string]TenantWindow, before, during float64) map[string]TenantWindow {
		b, d := ws[WindowBefore], ws[WindowDuring]
		b.AppP99, d.AppP99 = before, during
		ws[WindowBefore], ws[WindowDuring] = b, d
		return ws
	}
	rep := &TenantReport{Hot: "t00", Runs: []TenantRun{
		{Mode: "on", Round: 1, Isolation: "x", Tenants: map[string]map[string]TenantWindow{"t00": withApp(w(100, 400), 90, 95),
			"t01": withApp(w(100, 105), 12, 9), "t02": withApp(w(90, 110), 10, 13)}},
		{Mode: "apart", Round: 1, Isolation: "y", Tenants: map[string]map[string]TenantWindow{"t00": {}, "t01": w(40, 55), "t02": w(41, 50)}},
		{Mode: "off", Round: 2, Isolation: "z", Tenants: map[string]map[string]TenantWindow{"t00": w(100, 100), "t01": w(100, 100)}},
	}}
	for i := range rep.Runs {
		rep.Runs[i].summarise(rep.Hot)
	}
	// The quiet figures are each the largest among the tenants but t00.
	if r := rep.Runs[0]; math.Abs(r.QuietMaxRise-22.2222) > 0.001 || r.QuietBefore != 100 || r.QuietDuring != 110 {
		t.Errorf("on: quiet rise %v, before %v, during %v: want 22.2%%, 100, 110", r.QuietMaxRise, r.QuietBefore, r.QuietDuring)
	}
	if got := Rise(rep.Runs[0].Tenants["t00"]); got != 300 {
		t.Errorf("Rise = %v, want 300", got)
	}
	if got := Rise(map[string]TenantWindow{}); !math.IsNaN(got) {
		t.Errorf("Rise without a before p99 = %v, want NaN", got)
	}
	var md strings.Builder
	rep.Markdown(&md)
	for _, want := range []string{"| t00 (hot) | 100.0 | 400.0 | +300.0% |", "| t01 | 100.0 | 105.0 | +5.0% |", "max p99 rise: **+22.2%**", "20/20",
		// The summary sets each mode's p99 during the burst against the
		// floor of its round; a round without one has none.
		"| 1 | on | 100.0 | 110.0 | +22.2% | 2.00 | 12.0 / 13.0 |", "| 1 | apart | 41.0 | 55.0 | +37.5% | 1.00 | n/a |", "| 2 | off | 100.0 | 100.0 | +0.0% | n/a | n/a |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if err := rep.WriteFiles(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// With isolation on, the input producer's partitioner puts every record of
// the hot tenant on the last partition and no other tenant's there; the
// other modes keep kgo's default partitioner and the app's options differ
// as documented.
func TestTenantIsolationPlacesHotTenant(t *testing.T) {
	on := TenantIsolation{Mode: IsolationOn, Hot: "t00", Partitions: 6}
	opts, err := on.producerOpts()
	if err != nil || len(opts) != 1 {
		t.Fatalf("producerOpts = %v, %v: want the placement partitioner", opts, err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	part, err := processor.TenantPartitioner(on.placement(), func(r *kgo.Record) string { return tenantOf(r.Key) })
	if err != nil {
		t.Fatal(err)
	}
	tp := part.ForTopic("in")
	ks := newKeyspace(1, 200)
	for i := range 2000 {
		tenant := tenantName(i % 10)
		r := &kgo.Record{Key: fmt.Appendf(nil, "%s/%s", tenant, ks.next())}
		p := tp.Partition(r, 6)
		if (tenant == "t00") != (p == 5) {
			t.Fatalf("record %s on partition %d: want t00 and only t00 on 5", r.Key, p)
		}
	}
	for _, mode := range []string{IsolationOff, IsolationDefault} {
		iso := TenantIsolation{Mode: mode, Hot: "t00", Partitions: 6}
		if opts, err := iso.producerOpts(); err != nil || opts != nil || iso.sinkOpts() != nil {
			t.Errorf("%s: producer options %v, %v, sink options %v: want kgo's and the sink's defaults", mode, opts, err, iso.sinkOpts())
		}
	}
	if n := len(TenantIsolation{Mode: IsolationOff}.appOpts()); n != 1 {
		t.Errorf("off: %d app options, want 1 (fair scheduling off)", n)
	}
	if n := len(TenantIsolation{Mode: IsolationOn, Hot: "t00", HotRate: 100, Partitions: 6}.appOpts()); n != 2 {
		t.Errorf("on with a hot rate: %d app options, want 2 (fair scheduling, the rate limit)", n)
	}
	// The floor mode places like on but sends the hot tenant's records over
	// its rate elsewhere and limits no one (the app reads only what on
	// would admit).
	apart := TenantIsolation{Mode: IsolationApart, Hot: "t00", HotRate: 100, Partitions: 6}
	job := Job{AppID: "app", Input: "app-in"}
	if got := apart.apartTopic(job); got == "" || got == job.Input || !strings.HasPrefix(got, job.AppID+"-") {
		t.Errorf("apart: apart topic %q: want a topic of the job's own (AppID prefix, so cleanup deletes it), not the input", got)
	}
	if got := on.apartTopic(job); got != "" {
		t.Errorf("on: apart topic %q, want none (every record to the input)", got)
	}
	// What the app reads of a 10x burst at a steady 50/s: the floor reads
	// what on admits (its HotRate, never below the steady rate), or
	// nothing without a rate; the other modes read everything.
	for _, c := range []struct {
		iso  TenantIsolation
		want float64
	}{
		{apart, 2},
		{TenantIsolation{Mode: IsolationApart, Hot: "t00", HotRate: 20, Partitions: 6}, 1},
		{TenantIsolation{Mode: IsolationApart, Hot: "t00", HotRate: 5000, Partitions: 6}, 10},
		{TenantIsolation{Mode: IsolationApart, Hot: "t00", Partitions: 6}, 0},
		{on, 10},
	} {
		if got := c.iso.readFactor(50, 10); got != c.want {
			t.Errorf("%s, hot rate %v: reads %v x the steady rate, want %v", c.iso.Mode, c.iso.HotRate, got, c.want)
		}
	}
	if opts, err := apart.producerOpts(); err != nil || len(opts) != 1 || len(apart.sinkOpts()) != 1 {
		t.Errorf("apart: producer options %v, %v, sink options %v: want the placement's", opts, err, apart.sinkOpts())
	}
	if n := len(apart.appOpts()); n != 1 {
		t.Errorf("apart with a hot rate: %d app options, want 1 (fair scheduling; no rate limit for a tenant the app does not read)", n)
	}
	// Only a rate-limited hot tenant's partition is left out of the drain.
	for _, c := range []struct {
		iso  TenantIsolation
		want []int32
	}{
		{TenantIsolation{Mode: IsolationOn, Hot: "t00", HotRate: 100, Partitions: 6}, []int32{5}},
		{TenantIsolation{Mode: IsolationOn, Hot: "t00", Partitions: 6}, nil},
		{TenantIsolation{Mode: IsolationOff, Hot: "t00", HotRate: 100, Partitions: 6}, nil},
		{TenantIsolation{Mode: IsolationApart, Hot: "t00", HotRate: 100, Partitions: 6}, nil},
	} {
		if got := c.iso.throttledPartitions(); !slices.Equal(got, c.want) {
			t.Errorf("%s, hot rate %v: drain skips %v, want %v", c.iso.Mode, c.iso.HotRate, got, c.want)
		}
	}
}

// A worker's TENANTS lines count for a window only from appP99Settle into
// it (a line covers the last 1024 commits, most of them earlier) to its
// end; per tenant the largest p99 wins, and other lines are ignored.
func TestAppP99sTakesTheLargestSettledReport(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }
	var l eventLog
	l.ev = []event{
		{at(5), `TENANTS {"t01": 500}`}, // too early: mostly the window before
		{at(11), `TENANTS {"t01": 12.5, "t02": 8}`},
		{at(13), `RESTORED 0_1 counts 10`},
		{at(15), `TENANTS {"t01": 20, "t02": 7}`},
		{at(16), `TENANTS not json`},
		{at(20), `TENANTS {"t01": 900}`}, // the window's end: the next window's
	}
	got := l.appP99s(start, at(20))
	if len(got) != 2 || got["t01"] != 20 || got["t02"] != 8 {
		t.Errorf("appP99s = %v, want t01 20, t02 8", got)
	}
	var out strings.Builder
	writeTenants(&out, map[string]processor.TenantStats{"t01": {StalenessP99: 12500 * time.Microsecond}})
	l = eventLog{}
	l.ev = []event{{at(12), strings.TrimSpace(out.String())}}
	if got := l.appP99s(start, at(20)); got["t01"] != 12.5 {
		t.Errorf("printTenants wrote %q, read back as %v: want t01 12.5", out.String(), got)
	}
}

// The floor's producer sends the hot tenant's records over HotRate to the
// apart topic and the rest, steady rate included, to the input: the app
// reads what isolation on would admit, no more.
func TestDriveTenantsSplitsTheHotTenantForTheFloor(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "app-in", "app-apart"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o := TenantOptions{Tenants: 2, Hot: "t00", Rate: 400, BurstFactor: 10, HotRate: 600, KeysPerTenant: 10,
		Warmup: 1, Before: 300 * time.Millisecond, Burst: 400 * time.Millisecond, After: 1}
	iso := TenantIsolation{Mode: IsolationApart, Hot: o.Hot, HotRate: o.HotRate, Partitions: 2}
	job := Job{AppID: "app", Input: "app-in"}
	sched := o.schedule(time.Now())
	ctx, cancel := context.WithDeadline(context.Background(), sched.end)
	defer cancel()
	w := newTenantWatch(sched, o.Hot)
	if err := driveTenants(ctx, cl, job, iso, o, sched, w); err != nil {
		t.Fatal(err)
	}
	// Per tenant 200/s steady; t00 2000/s during the 0.4 s burst, of which
	// the input gets 600/s and the apart topic the rest.
	count := map[string]map[string]int{}
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("app-in", "app-apart"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for {
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := rd.PollFetches(fctx)
		fcancel()
		if fs.NumRecords() == 0 {
			break // everything sent has been read
		}
		fs.EachRecord(func(r *kgo.Record) {
			if count[r.Topic] == nil {
				count[r.Topic] = map[string]int{}
			}
			count[r.Topic][tenantOf(r.Key)]++
		})
	}
	if n := count["app-apart"]["t01"]; n != 0 {
		t.Errorf("%d of the quiet tenant's records in the apart topic, want none", n)
	}
	in, apart := count["app-in"]["t00"], count["app-apart"]["t00"]
	// The drive stops at its last tick, up to a few ticks short of the
	// end under load: allow that much less.
	wantIn, wantApart := sched.due(sched.end, 200, 3, true), sched.due(sched.end, 200, 10, true)-sched.due(sched.end, 200, 3, true)
	if in > wantIn+1 || in < wantIn-60 || apart > wantApart+1 || apart < wantApart-200 {
		t.Errorf("hot tenant: %d records to the input, %d apart; want %d to the input (its steady rate, then 600/s in the burst) and %d apart (the rest)",
			in, apart, wantIn, wantApart)
	}
	// Only what the app is to answer, and was written, counts as the hot
	// tenant's input (a tick at the deadline may write a few records after
	// every window, so in no window).
	counted := 0
	for _, n := range w.in["t00"] {
		counted += int(n)
	}
	if counted > in || counted < in-20 {
		t.Errorf("hot tenant: %d inputs counted in the windows, want the %d sent to the input", counted, in)
	}
}

// TestAtCommitP99MissingInAWindowIsNotZero: a window the worker reported no
// at-commit p99 in (shorter than appP99Settle, as with --quick) reads n/a,
// not 0.0, which would claim perfect freshness.
func TestAtCommitP99MissingInAWindowIsNotZero(t *testing.T) {
	for _, c := range []struct {
		before, during float64
		want           string
	}{
		{0, 66.1, "n/a / 66.1"},
		{61.4, 0, "61.4 / n/a"},
		{0, 0, "n/a"},
		{61.4, 66.1, "61.4 / 66.1"},
	} {
		if got := appPair(c.before, c.during); got != c.want {
			t.Errorf("appPair(%v, %v) = %q, want %q", c.before, c.during, got, c.want)
		}
	}
}
