package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tenant burst measurement (issue #15, "Measure"): ten tenants share
// one pipeline at a steady rate, then one of them (the hot tenant) bursts to
// burst-factor × its rate for the burst phase, then steady again. An
// external read_committed consumer measures each tenant's staleness and the
// report compares each tenant's p99 in the window before the burst with its
// p99 during it, once with isolation off (every setting default) and once
// with it on, on the same input in one run.
//
// Staleness is receive time at the external consumer minus the output
// record's timestamp. The pipeline is a per-key count whose output carries
// the timestamp of the input that caused it, and the driver stamps every
// input with its send time, so this is send-to-visible latency: producer
// batching, broker append, the app's fetch, processing and the transaction
// that makes the output readable. Windows are assigned by that timestamp
// (when the input was sent), not by when the output arrived, so "during"
// holds exactly the outputs of inputs sent during the burst, however late
// they become visible. The watcher keeps reading after the drive stops
// until the app's committed offsets reach the input's end, so the backlog a
// burst leaves is measured, not cut off; the report counts outputs against
// inputs per window to show that nothing is missing.
//
// Isolation "off" is an application that does nothing about tenants (the
// runtime as before issue #15); "on" is what the runtime offers for a hot
// tenant; "default" is the runtime's defaults. TenantIsolation
// (tenants_isolation.go) says exactly which settings each is.

// TenantOptions configure RunTenants. Zero fields take defaults from
// EnsureDefaults.
type TenantOptions struct {
	Brokers []string
	// Tenants is how many tenants share the pipeline (default 10), named
	// t00, t01, …; the hot tenant is Hot (default t00).
	Tenants int
	Hot     string
	// Rate is the steady input rate of all tenants together, records/s,
	// split evenly (default 5000: the count pipeline runs near 200k/s alone
	// on this 2-core machine, so the burst's 1.9 × Rate leaves room for the
	// other engineers' load and the driver and watcher in this process).
	Rate float64
	// BurstFactor multiplies the hot tenant's rate during the burst (10).
	BurstFactor float64
	// Warmup is steady input before the measured "before" window (10 s,
	// quick 5 s); Before is that window (20 s, quick 10 s); Burst is the
	// burst (60 s, quick 15 s); After is steady input after it (20 s, quick
	// 5 s), reported as a third window.
	Warmup, Before, Burst, After time.Duration
	// FirstWarmup lengthens the first run's Warmup (30 s, quick 10 s):
	// after a broker start its JVM is cold, and on this machine a fresh
	// broker's commits took 76 ms, then 25 ms after 10 s and 12 ms after
	// 30 s, so the first mode measured in a process read a p99 before the
	// burst twice the next runs'.
	FirstWarmup time.Duration
	// Drain bounds the wait, after the drive stops, for the app to commit
	// the input's end (60 s).
	Drain time.Duration
	// Partitions of the input and output topics (default 6).
	Partitions int32
	// KeysPerTenant is each tenant's key space, Zipf-skewed (1000).
	KeysPerTenant int
	// Modes run in this order, Rounds times over (default IsolationOff,
	// IsolationOn; IsolationDefault is the third): the modes interleave, so
	// a noisy neighbour on the machine hits them alike.
	Modes  []string
	Rounds int
	// HotRate, when > 0, also rate-limits the hot tenant to this many
	// records/s at the source with isolation on (admission control: its
	// partitions are paused, never dropped).
	HotRate float64
	// Threads is the application's stream threads (processor.WithThreads;
	// with isolation on, the hot tenant's partition is pinned to one of
	// them); 0 keeps tidemark's default.
	Threads int
	Quick   bool
	Env     Env
	WorkDir string
}

// EnsureDefaults fills zero fields and validates the rest.
func (o *TenantOptions) EnsureDefaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("bench tenants: Brokers is required (start one with `make kafka-up`)")
	}
	def := func(d *time.Duration, full, quick time.Duration) {
		if *d == 0 {
			*d = full
			if o.Quick {
				*d = quick
			}
		}
	}
	if o.Tenants == 0 {
		o.Tenants = 10
	}
	if o.Tenants < 2 {
		return fmt.Errorf("bench tenants: %d tenants: want at least 2 (a hot one and a quiet one)", o.Tenants)
	}
	if o.Hot == "" {
		o.Hot = tenantName(0)
	}
	if !slices.Contains(o.tenantNames(), o.Hot) {
		return fmt.Errorf("bench tenants: hot tenant %q is not one of %v", o.Hot, o.tenantNames())
	}
	if o.Rate == 0 {
		o.Rate = 5000
	}
	if o.BurstFactor == 0 {
		o.BurstFactor = 10
	}
	if o.Rate <= 0 || o.BurstFactor < 1 {
		return fmt.Errorf("bench tenants: rate %v and burst factor %v: want rate > 0, factor ≥ 1", o.Rate, o.BurstFactor)
	}
	def(&o.Warmup, 10*time.Second, 5*time.Second)
	def(&o.Before, 20*time.Second, 10*time.Second)
	def(&o.Burst, 60*time.Second, 15*time.Second)
	def(&o.After, 20*time.Second, 5*time.Second)
	def(&o.FirstWarmup, 30*time.Second, 10*time.Second)
	def(&o.Drain, 60*time.Second, 30*time.Second)
	if o.Partitions == 0 {
		o.Partitions = 6
	}
	if o.KeysPerTenant == 0 {
		o.KeysPerTenant = 1000
	}
	if len(o.Modes) == 0 {
		o.Modes = []string{"off", "on"}
	}
	for _, m := range o.Modes {
		if m != IsolationOff && m != IsolationDefault && m != IsolationOn && m != IsolationApart {
			return fmt.Errorf("bench tenants: mode %q: want %s, %s, %s or %s", m, IsolationOff, IsolationDefault, IsolationOn, IsolationApart)
		}
	}
	if o.Partitions < 2 {
		return fmt.Errorf("bench tenants: %d partitions: isolation on needs one for the hot tenant and one for the others", o.Partitions)
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Env.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench tenants: own executable: %w", err)
		}
		o.Env.Self = self
	}
	if o.WorkDir == "" {
		d, err := os.MkdirTemp("", "tidemark-bench-tenants-")
		if err != nil {
			return fmt.Errorf("bench tenants: work dir: %w", err)
		}
		o.WorkDir = d
	}
	return nil
}

func tenantName(i int) string { return fmt.Sprintf("t%02d", i) }

func (o *TenantOptions) tenantNames() []string {
	out := make([]string, o.Tenants)
	for i := range out {
		out[i] = tenantName(i)
	}
	return out
}

// tenantOf is the tenant of an input or output key "<tenant>/<sku>".
func tenantOf(key []byte) string {
	s := string(key)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return ""
}

// Windows of a tenant run, by input send time.
const (
	WindowBefore = "before"
	WindowDuring = "during"
	WindowAfter  = "after"
)

// schedule is one run's timeline: when the drive started and the burst's
// bounds.
type schedule struct {
	start, burstStart, burstEnd, end time.Time
	before                           time.Duration
}

func (o *TenantOptions) schedule(start time.Time) schedule {
	bs := start.Add(o.Warmup + o.Before)
	be := bs.Add(o.Burst)
	return schedule{start: start, burstStart: bs, burstEnd: be, end: be.Add(o.After), before: o.Before}
}

// windows are the measured windows' spans of wall time.
func (s schedule) windows() map[string][2]time.Time {
	return map[string][2]time.Time{WindowBefore: {s.burstStart.Add(-s.before), s.burstStart},
		WindowDuring: {s.burstStart, s.burstEnd}, WindowAfter: {s.burstEnd, s.end}}
}

// tenantsReportEvery is how often the burst measurement's worker reports
// its tenants' at-commit p99.
const tenantsReportEvery = 2 * time.Second

// window is the measured window an input sent at ts falls in, or "".
func (s schedule) window(ts time.Time) string {
	switch {
	case ts.Before(s.burstStart.Add(-s.before)):
		return ""
	case ts.Before(s.burstStart):
		return WindowBefore
	case ts.Before(s.burstEnd):
		return WindowDuring
	case ts.Before(s.end):
		return WindowAfter
	}
	return ""
}

// due is how many records a tenant with steady rate r (and factor × r
// during the burst when hot) should have sent by t: the integral of its
// rate since the start.
func (s schedule) due(t time.Time, r, factor float64, hot bool) int {
	el := t.Sub(s.start).Seconds()
	if !hot {
		return int(r * el)
	}
	bs, be := s.burstStart.Sub(s.start).Seconds(), s.burstEnd.Sub(s.start).Seconds()
	burst := math.Max(0, math.Min(el, be)-bs)
	return int(r*(el-burst) + r*factor*burst)
}

// TenantWindow is one tenant's measurement in one window.
type TenantWindow struct {
	Inputs  int64   `json:"inputs"`  // records the driver sent in the window
	Outputs int64   `json:"outputs"` // outputs of them the watcher saw
	P50     float64 `json:"staleness_p50_ms"`
	P99     float64 `json:"staleness_p99_ms"`
	Max     float64 `json:"staleness_max_ms"`
	// AppP99 is the app's at-commit p99 for the tenant
	// (tenants_atcommit.go): the largest the worker reported from 10 s
	// into the window to its end; 0 when it reported none.
	AppP99 float64 `json:"app_p99_ms,omitempty"`
}

// TenantRun is one mode's run: per tenant, per window.
type TenantRun struct {
	Mode      string                             `json:"mode"`
	Round     int                                `json:"round"`
	Isolation string                             `json:"isolation"` // what "on" meant, or "default settings"
	Tenants   map[string]map[string]TenantWindow `json:"tenants"`
	// QuietMaxRise is the largest p99 rise, in %, from before to during
	// the burst among the tenants other than the hot one.
	QuietMaxRise float64 `json:"quiet_max_p99_rise_pct"`
	// QuietBefore and QuietDuring are the largest p99 among the quiet
	// tenants before and during the burst, in ms.
	QuietBefore float64 `json:"quiet_max_p99_before_ms"`
	QuietDuring float64 `json:"quiet_max_p99_during_ms"`
	// QuietAppBefore and QuietAppDuring are the same from the app's
	// at-commit account (TenantWindow.AppP99).
	QuietAppBefore float64 `json:"quiet_max_app_p99_before_ms,omitempty"`
	QuietAppDuring float64 `json:"quiet_max_app_p99_during_ms,omitempty"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	// HotBacklog is the hot tenant's input left unprocessed when the
	// run ended: with its rate limited at the source (HotRate), the drain
	// waits only for the other tenants' partitions, and the hot
	// partition's backlog drains at the limit, long after the run.
	HotBacklog int64  `json:"hot_backlog_records,omitempty"`
	Error      string `json:"error,omitempty"`
}

// summarise sets the quiet-tenant figures from Tenants, hot excluded.
func (run *TenantRun) summarise(hot string) {
	run.QuietMaxRise = math.Inf(-1)
	run.QuietBefore, run.QuietDuring, run.QuietAppBefore, run.QuietAppDuring = 0, 0, 0, 0
	for t, ws := range run.Tenants {
		if t == hot {
			continue
		}
		if r := Rise(ws); !math.IsNaN(r) {
			run.QuietMaxRise = math.Max(run.QuietMaxRise, r)
		}
		run.QuietBefore = math.Max(run.QuietBefore, ws[WindowBefore].P99)
		run.QuietDuring = math.Max(run.QuietDuring, ws[WindowDuring].P99)
		run.QuietAppBefore = math.Max(run.QuietAppBefore, ws[WindowBefore].AppP99)
		run.QuietAppDuring = math.Max(run.QuietAppDuring, ws[WindowDuring].AppP99)
	}
	if math.IsInf(run.QuietMaxRise, -1) {
		run.QuietMaxRise = math.NaN()
	}
}

// TenantReport is a whole tenant burst measurement.
type TenantReport struct {
	Started  time.Time   `json:"started"`
	Machine  string      `json:"machine"`
	Options  string      `json:"options"`
	Hot      string      `json:"hot_tenant"`
	Runs     []TenantRun `json:"runs"`
	Duration string      `json:"duration"`
}

// Rise is the p99 rise from before to during the burst, in %.
func Rise(w map[string]TenantWindow) float64 {
	b, d := w[WindowBefore].P99, w[WindowDuring].P99
	if b <= 0 {
		return math.NaN()
	}
	return (d - b) / b * 100
}

// RunTenants measures the tenant burst with every mode, Rounds times over,
// interleaved. A mode that fails records the error and the run goes on.
func RunTenants(ctx context.Context, o TenantOptions, progress func(string)) (*TenantReport, error) {
	if err := o.EnsureDefaults(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...))
	if err != nil {
		return nil, fmt.Errorf("bench tenants: client: %w", err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return nil, fmt.Errorf("bench tenants: broker %v: %w", o.Brokers, err)
	}
	h := &harness{o: Options{Brokers: o.Brokers, Partitions: o.Partitions, WorkDir: o.WorkDir, Env: o.Env}, cl: cl, adm: kadm.NewClient(cl), progress: progress}
	rep := &TenantReport{Started: time.Now(), Machine: machine(), Hot: o.Hot, Options: fmt.Sprintf(
		"tenants=%d hot=%s rate=%.0f/s burst=%.0fx for %s warmup=%s (first run +%s) before=%s after=%s partitions=%d keys/tenant=%d hot-rate=%.0f quick=%v",
		o.Tenants, o.Hot, o.Rate, o.BurstFactor, o.Burst, o.Warmup, o.FirstWarmup, o.Before, o.After, o.Partitions, o.KeysPerTenant, o.HotRate, o.Quick)}
	for round := 1; round <= o.Rounds; round++ {
		for i, mode := range o.Modes {
			ro := o
			if round == 1 && i == 0 {
				ro.Warmup += o.FirstWarmup
			}
			rep.Runs = append(rep.Runs, h.tenantRun(ctx, ro, mode, round))
			if ctx.Err() != nil {
				rep.Duration = time.Since(rep.Started).Round(time.Second).String()
				return rep, ctx.Err()
			}
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

func (h *harness) tenantRun(ctx context.Context, o TenantOptions, mode string, round int) TenantRun {
	iso := TenantIsolation{Mode: mode, Hot: o.Hot, HotRate: o.HotRate, Partitions: o.Partitions}
	run := TenantRun{Mode: mode, Round: round, Isolation: iso.String()}
	sys := System{Name: "tidemark-tenants-" + mode, Kind: tenantsWorker, Policy: "adaptive", Threads: o.Threads}
	if o.Threads > 1 {
		sys.Name += fmt.Sprintf("-%dt", o.Threads)
	}
	h.progress(fmt.Sprintf("tenants, isolation %s (round %d): %s", mode, round, run.Isolation))
	job, err := h.job(ctx, "tenants", sys)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer h.cleanup(job)
	job.Isolation = &iso
	job.ReportTenants = tenantsReportEvery
	if apart := iso.apartTopic(job); apart != "" {
		if err := h.createTopics(ctx, apart); err != nil {
			run.Error = err.Error()
			return run
		}
	}
	p, err := sys.start(ctx, h.o.Env, job)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer p.stop()
	popts, err := iso.producerOpts()
	if err != nil {
		run.Error = err.Error()
		return run
	}
	producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(o.Brokers...), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(1 << 20)}, popts...)...)
	if err != nil {
		run.Error = fmt.Sprintf("bench tenants: producer: %v", err)
		return run
	}
	defer producer.Close()
	before := p.usage()
	sched := o.schedule(time.Now())
	w := newTenantWatch(sched, o.Hot)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watched := make(chan error, 1)
	go func() { watched <- w.run(wctx, o.Brokers, job.Output) }()
	dctx, dcancel := context.WithDeadline(ctx, sched.end)
	err = driveTenants(dctx, producer, job, iso, o, sched, w)
	dcancel()
	if err == nil {
		skip := iso.throttledPartitions()
		what := "the input's end"
		if len(skip) > 0 {
			what = fmt.Sprintf("the input's end on every partition but the rate-limited %s's %v", o.Hot, skip)
		}
		h.progress(fmt.Sprintf("  drive done; waiting up to %s for the app to commit %s", o.Drain, what))
		_, err = throughputExcept(ctx, h.adm, job.AppID, job.Input, sched.start, o.Drain, skip...)
		if err != nil {
			err = fmt.Errorf("bench tenants: the app did not catch up within the drain (outputs of late windows are missing): %w", err)
		}
		if len(skip) > 0 {
			run.HotBacklog = h.backlogOf(ctx, job.AppID, job.Input, skip)
		}
	}
	// The offsets commit with the outputs in one transaction: give the
	// watcher a moment to read the last of them.
	time.Sleep(2 * time.Second)
	after := p.usage()
	if exited := p.exitedEarly(); exited != nil && err == nil {
		err = exited
	}
	wcancel()
	if werr := <-watched; werr != nil && err == nil {
		err = werr
	}
	run.Tenants = w.result(o.tenantNames())
	for win, span := range sched.windows() {
		for t, v := range p.events.appP99s(span[0], span[1]) {
			if ws, ok := run.Tenants[t]; ok {
				tw := ws[win]
				tw.AppP99 = v
				ws[win] = tw
			}
		}
	}
	run.CPUSeconds = (after.CPU - before.CPU).Seconds()
	run.summarise(o.Hot)
	if serr := w.quiet.write(map[string]any{"mode": mode, "round": round, "burst_from_s": sched.burstStart.Sub(sched.start).Seconds(),
		"burst_to_s": sched.burstEnd.Sub(sched.start).Seconds()}); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		run.Error = err.Error()
	}
	h.progress(fmt.Sprintf("  isolation %s: quiet tenants' max p99 rise %.1f%%, hot %s p99 %.1f → %.1f ms", mode, run.QuietMaxRise,
		o.Hot, run.Tenants[o.Hot][WindowBefore].P99, run.Tenants[o.Hot][WindowDuring].P99))
	return run
}

// driveTenants produces every tenant's input on schedule until ctx is done
// (the schedule's end), each record stamped with its send time; of the hot
// tenant's, those over iso's readFactor go to its apartTopic, and the
// others, which the app is to answer, are counted in their window. Each
// tenant draws its keys from its own seeded Zipf key space, so every mode
// gets the same key sequence.
func driveTenants(ctx context.Context, cl *kgo.Client, job Job, iso TenantIsolation, o TenantOptions, s schedule, w *tenantWatch) error {
	names := o.tenantNames()
	keys := make([]*keyspace, len(names))
	sent := make([]int, len(names))
	for i := range keys {
		keys[i] = newKeyspace(uint64(100+i), o.KeysPerTenant)
	}
	per := o.Rate / float64(len(names))
	readFactor, apart := iso.readFactor(per, o.BurstFactor), iso.apartTopic(job)
	read := 0 // the hot tenant's records sent to the input
	var mu sync.Mutex
	var perr error
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := cl.Flush(fctx); err != nil && perr == nil {
				return fmt.Errorf("bench tenants: flush input: %w", err)
			}
			mu.Lock()
			defer mu.Unlock()
			return perr
		case now := <-t.C:
			for i, name := range names {
				hot := name == o.Hot
				due := s.due(now, per, o.BurstFactor, hot)
				readDue := due
				if hot && apart != "" {
					readDue = 0
					if readFactor > 0 {
						readDue = s.due(now, per, readFactor, true)
					}
				}
				for ; sent[i] < due; sent[i]++ {
					topic := job.Input
					if hot && apart != "" {
						if read < readDue {
							read++
						} else {
							topic = apart
						}
					}
					ts := time.Now()
					key := fmt.Appendf(nil, "%s/%s", name, keys[i].next())
					cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: fmt.Appendf(nil, "%d:%s", sent[i], payload), Timestamp: ts},
						func(r *kgo.Record, err error) {
							// Counted once written, not when handed over: a
							// tick that races the deadline hands over records
							// that the cancelled context then fails.
							if err == nil && r.Topic == job.Input { // what the app is to read and answer
								w.sent(name, ts)
							}
							if err != nil && ctx.Err() == nil {
								mu.Lock()
								if perr == nil {
									perr = fmt.Errorf("bench tenants: produce: %w", err)
								}
								mu.Unlock()
							}
						})
				}
			}
		}
	}
}

// tenantWatch holds per tenant and window the inputs sent and the
// staleness of their outputs.
type tenantWatch struct {
	sched schedule
	mu    sync.Mutex
	in    map[string]map[string]int64
	hists map[string]map[string]*hdrhistogram.Histogram
	// quiet is, with TIDEMARK_BENCH_SERIES set, the staleness of the
	// tenants but hot per second since the schedule's start: which
	// seconds of the burst set their p99.
	hot   string
	quiet secondSeries
}

func newTenantWatch(s schedule, hot string) *tenantWatch {
	return &tenantWatch{sched: s, in: map[string]map[string]int64{}, hists: map[string]map[string]*hdrhistogram.Histogram{},
		hot: hot, quiet: newSecondSeries()}
}

func (w *tenantWatch) sent(tenant string, ts time.Time) {
	win := w.sched.window(ts.Truncate(time.Millisecond)) // as the record's timestamp will read
	if win == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.in[tenant] == nil {
		w.in[tenant] = map[string]int64{}
	}
	w.in[tenant][win]++
}

func (w *tenantWatch) observe(tenant string, ts, now time.Time) {
	win := w.sched.window(ts)
	if win == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hists[tenant] == nil {
		w.hists[tenant] = map[string]*hdrhistogram.Histogram{}
	}
	h := w.hists[tenant][win]
	if h == nil {
		h = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
		w.hists[tenant][win] = h
	}
	_ = h.RecordValue(max(1, now.Sub(ts).Microseconds()))
	if tenant != w.hot {
		w.quiet.observe(int(ts.Sub(w.sched.start).Seconds()), max(1, now.Sub(ts).Microseconds()))
	}
}

// run consumes the output read_committed from its start until ctx is done.
func (w *tenantWatch) run(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("bench tenants: output consumer: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) { w.observe(tenantOf(r.Key), r.Timestamp, now) })
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (w *tenantWatch) result(names []string) map[string]map[string]TenantWindow {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]map[string]TenantWindow{}
	for _, t := range names {
		out[t] = map[string]TenantWindow{}
		for _, win := range []string{WindowBefore, WindowDuring, WindowAfter} {
			tw := TenantWindow{Inputs: w.in[t][win]}
			if h := w.hists[t][win]; h != nil {
				tw.Outputs = h.TotalCount()
				tw.P50 = float64(h.ValueAtQuantile(50)) / 1000
				tw.P99 = float64(h.ValueAtQuantile(99)) / 1000
				tw.Max = float64(h.Max()) / 1000
			}
			out[t][win] = tw
		}
	}
	return out
}

// backlogOf is the input group has yet to commit on topic's partitions
// parts, or -1 when the offsets cannot be read.
func (h *harness) backlogOf(ctx context.Context, group, topic string, parts []int32) int64 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ends, err := h.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	offs, err := h.adm.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	var left int64
	for _, p := range parts {
		end, ok := ends.Lookup(topic, p)
		if !ok {
			return -1
		}
		at := int64(0)
		if c, ok := offs.Lookup(topic, p); ok && c.At > 0 {
			at = c.At
		}
		left += max(0, end.Offset-at)
	}
	return left
}
