package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The freshness sweep (issue #12, Deliver item 4; bench sweep): calibrate
// the capacity, then run every commit policy once per repeat through the
// same phased load (sweep_schedule.go) with one SIGKILL and restart of the
// worker at the same point, and measure each phase (sweep_measure.go).
//
// Both workloads run in one application per policy (the "sweep" workload:
// count and windowed count from the one input, to two outputs), so one run
// per policy measures both under the same load and the full sweep fits its
// time budget; its capacity is calibrated as such. The count workload's
// own max throughput is calibrated too, for the throughput targets against
// Kafka Streams and the raw transactional limit.

// SweepOptions configure RunSweep. Zero fields take defaults.
type SweepOptions struct {
	Brokers []string
	// Policies in their order of the first repeat; later repeats rotate
	// it. Default DefaultSweepPolicies.
	Policies []System
	// Repeats of the whole policy set (default 1).
	Repeats int
	// Loads are the phases' fractions of the calibrated capacity (default
	// DefaultSweepLoads); Phase each phase's length (default 20 s, quick
	// 2 s); Warmup the unmeasured lead-in at the first load (3 s, quick 1
	// s); Drain how long outputs are watched after the input stops (3 s,
	// quick 2 s).
	Loads                []float64
	Phase, Warmup, Drain time.Duration
	// FirstWarmup lengthens the first run's Warmup (default 20 s, quick
	// 0). Right after the calibrations, the first run's broker worked
	// harder per record (35 and 32 µs against 24 and 27 µs in the same
	// policy's later repeat, two sweeps) and its p99 at 10% was 1.7–1.9 ×
	// the later repeat's. With 20 s more warm-up the broker's CPU per
	// record was back to the later repeat's (23 against 27 µs), but the
	// p99 was still 1.7 × (87 against 51 ms, one run): the warm-up takes
	// out part of the first run's handicap, not all of it, and the order
	// rotation spreads the rest.
	FirstWarmup       time.Duration
	KillPhase         int     // 0-based; default 2 (the 90% phase)
	KillFrac          float64 // default 0.6
	NoKill            bool    // no SIGKILL at all (experiments on a phase's steady state)
	CountRecords      int     // count calibration, default 2M (quick 100k)
	SweepRecords      int     // sweep-workload calibration, default 500k (quick 100k)
	WarmRecords       int     // before each calibration, default 200k (quick 20k)
	Capacity          float64 // skip calibration: the load base, records/s
	Keys              int     // default 10k, Zipf 1.2
	Partitions        int32   // default 4
	Skew              time.Duration
	WindowSize, Grace time.Duration // default 1 s, 5 s
	Seed              uint64
	BrokerPID         int // default: found from the bootstrap port
	Quick             bool
	Env               Env
	WorkDir           string
	// SkipRawTxn and SkipCount leave calibrations out (tests): the raw
	// transactional limit, and all three count calibrations.
	SkipRawTxn, SkipCount bool
}

// DefaultSweepPolicies are the policies: tidemark adaptive, fixed
// 10/20/50/100/200 ms, and Kafka Streams with its default 100 ms commit
// interval (EOS v2, record cache on).
func DefaultSweepPolicies() []System {
	out := []System{{Name: "tidemark-adaptive", Kind: "tidemark", Policy: "adaptive"}}
	for _, ms := range []int{10, 20, 50, 100, 200} {
		out = append(out, System{Name: fmt.Sprintf("tidemark-fixed-%dms", ms), Kind: "tidemark", Policy: "fixed",
			CommitInterval: time.Duration(ms) * time.Millisecond})
	}
	return append(out, System{Name: "kstreams-100ms", Kind: "kstreams", CommitInterval: 100 * time.Millisecond})
}

// ExtraSweepPolicies can be chosen with --policies but are not in the
// default run: the adaptive policy with two stream threads, without
// pipelined commits, and with the count's record cache on. The report's targets compare only tidemark-adaptive
// with the tidemark-fixed-* policies; these are rows beside them.
func ExtraSweepPolicies() []System {
	return []System{
		{Name: "tidemark-adaptive-2t", Kind: "tidemark", Policy: "adaptive", Threads: 2},
		{Name: "tidemark-adaptive-nopipe", Kind: "tidemark", Policy: "adaptive", Pipelined: "off"},
		{Name: "tidemark-adaptive-cache", Kind: "tidemark", Policy: "adaptive", RecordCache: benchRecordCache},
		{Name: "tidemark-adaptive-cache-2t", Kind: "tidemark", Policy: "adaptive", RecordCache: benchRecordCache, Threads: 2},
		{Name: "tidemark-adaptive-tol1", Kind: "tidemark", Policy: "adaptive", P99Tolerance: 0.01},
	}
}

func (o *SweepOptions) ensureDefaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("bench sweep: Brokers is required (start one with `make kafka-up`)")
	}
	def := func(d *time.Duration, full, quick time.Duration) {
		if *d == 0 {
			*d = full
			if o.Quick {
				*d = quick
			}
		}
	}
	defN := func(n *int, full, quick int) {
		if *n == 0 {
			*n = full
			if o.Quick {
				*n = quick
			}
		}
	}
	if len(o.Policies) == 0 {
		o.Policies = DefaultSweepPolicies()
	}
	if err := checkWorkers(o.Policies); err != nil {
		return err
	}
	if o.Repeats == 0 {
		o.Repeats = 1
	}
	if o.Loads == nil {
		o.Loads = DefaultSweepLoads
	}
	def(&o.Phase, 20*time.Second, 2*time.Second)
	def(&o.Warmup, 3*time.Second, time.Second)
	def(&o.FirstWarmup, 20*time.Second, 0)
	def(&o.Drain, 3*time.Second, 2*time.Second)
	if o.KillPhase == 0 && o.KillFrac == 0 {
		o.KillPhase, o.KillFrac = min(2, len(o.Loads)-1), 0.6
	}
	defN(&o.CountRecords, 2_000_000, 50_000)
	defN(&o.SweepRecords, 500_000, 50_000)
	defN(&o.WarmRecords, 200_000, 20_000)
	defN(&o.Keys, 10_000, 10_000)
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	def(&o.Skew, 5*time.Second, 5*time.Second)
	def(&o.WindowSize, time.Second, time.Second)
	def(&o.Grace, 5*time.Second, 5*time.Second)
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.BrokerPID == 0 {
		o.BrokerPID = brokerPID(o.Brokers[0])
	}
	base := Options{Brokers: o.Brokers, Env: o.Env, WorkDir: o.WorkDir, Records: 10_000, Workloads: []string{"count"}, Systems: []System{{Name: "-"}}}
	if err := base.EnsureDefaults(); err != nil {
		return err
	}
	o.Env, o.WorkDir = base.Env, base.WorkDir
	return o.schedule(1).validate()
}

func (o *SweepOptions) schedule(capacity float64) sweepSchedule {
	return sweepSchedule{capacity: capacity, loads: o.Loads, warmup: o.Warmup, phase: o.Phase, killPhase: o.KillPhase, killFrac: o.KillFrac}
}

// RunSweep calibrates and runs every policy Repeats times, interleaved.
// A run that fails records its error and the sweep goes on.
func RunSweep(ctx context.Context, o SweepOptions, progress func(string)) (*SweepReport, error) {
	if err := o.ensureDefaults(); err != nil {
		return nil, err
	}
	cl, err := driverClient(ctx, o.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	s := &sweeper{o: o, cl: cl, adm: adm, progress: progress,
		h: &harness{o: Options{Brokers: o.Brokers, Partitions: o.Partitions, WorkDir: o.WorkDir}, cl: cl, adm: adm, progress: progress}}
	rep := &SweepReport{Started: time.Now(), Machine: machine(), Seed: o.Seed, Loads: o.Loads, PhaseSec: o.Phase.Seconds(),
		WarmupSec: o.Warmup.Seconds(), FirstWarmupSec: o.FirstWarmup.Seconds(), Keys: o.Keys, Zipf: sweepZipf, Partitions: o.Partitions, SkewMs: o.Skew.Milliseconds(),
		WindowMs: o.WindowSize.Milliseconds(), GraceMs: o.Grace.Milliseconds(), KillPhase: o.KillPhase + 1, KillFrac: o.KillFrac,
		NoKill: o.NoKill, Repeats: o.Repeats, BrokerPID: o.BrokerPID, Quick: o.Quick}
	progress(fmt.Sprintf("sweep: seed %d, broker pid %d, loads %v of capacity, phases of %s", o.Seed, o.BrokerPID, o.Loads, o.Phase))
	finish := func(err error) (*SweepReport, error) {
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		rep.Targets = rep.checkTargets()
		return rep, err
	}
	rep.FetchFloorMs, rep.TxnCommitMs, err = probeTxnFloor(ctx, o.Brokers, s.h)
	if err != nil {
		progress("  fetch floor probe: " + err.Error())
	} else {
		progress(fmt.Sprintf("  one-record transaction: commit %.1f ms, then visible to read_committed %.1f ms later (medians)", rep.TxnCommitMs, rep.FetchFloorMs))
	}

	// Calibration: max throughput with the producer running concurrently.
	var kstreams *System
	for i := range o.Policies {
		if o.Policies[i].Kind == "kstreams" && kstreams == nil {
			kstreams = &o.Policies[i]
		}
	}
	adaptive := System{Name: "tidemark-adaptive", Kind: "tidemark", Policy: "adaptive"}
	type cal struct {
		sys      System
		workload string
		records  int
	}
	var cals []cal
	if !o.SkipCount {
		cals = append(cals, cal{adaptive, "count", o.CountRecords})
		// A policy with the record cache on gets its own count
		// calibration: it emits like Kafka Streams, one update per key
		// per commit, so its max throughput is the like-for-like one.
		for _, p := range o.Policies {
			if p.Kind == "tidemark" && p.RecordCache > 0 {
				cals = append(cals, cal{p, "count", o.CountRecords})
				break
			}
		}
		if kstreams != nil {
			cals = append(cals, cal{*kstreams, "count", o.CountRecords})
		}
		if !o.SkipRawTxn {
			cals = append(cals, cal{System{Name: "raw-txn", Kind: "raw-txn"}, "stateless", o.CountRecords})
		}
	}
	if o.Capacity == 0 {
		cals = append(cals, cal{adaptive, "sweep", o.SweepRecords})
	}
	if kstreams != nil {
		cals = append(cals, cal{*kstreams, "sweep", o.SweepRecords})
	}
	for _, c := range cals {
		r := s.calibrate(ctx, c.sys, c.workload, c.records)
		rep.Calibrations = append(rep.Calibrations, r)
		if ctx.Err() != nil {
			return finish(ctx.Err())
		}
	}
	rep.Capacity = o.Capacity
	if rep.Capacity == 0 {
		rep.Capacity = rep.calibrated(adaptive.Name, "sweep")
	}
	if rep.Capacity <= 0 {
		return finish(errors.New("bench sweep: calibration of the sweep workload failed; no capacity to load against"))
	}
	progress(fmt.Sprintf("capacity: %.0f records/s (the sweep workload under tidemark-adaptive); phases at %v of it", rep.Capacity, o.Loads))

	for r := range o.Repeats {
		for i := range o.Policies {
			p := o.Policies[(i+r)%len(o.Policies)]
			extra := time.Duration(0)
			if r == 0 && i == 0 {
				extra = o.FirstWarmup
			}
			rep.Runs = append(rep.Runs, s.run(ctx, p, r, rep.Capacity, extra))
			if ctx.Err() != nil {
				return finish(ctx.Err())
			}
		}
	}
	return finish(nil)
}

const sweepZipf = 1.2

type sweeper struct {
	o        SweepOptions
	cl       *kgo.Client
	adm      *kadm.Client
	h        *harness
	progress func(string)
}

// sweepJob is a fresh job of workload w for system sys, with the sweep's
// window output topic when w is "sweep".
func (s *sweeper) sweepJob(ctx context.Context, w string, sys System) (Job, error) {
	job, err := s.h.job(ctx, w, sys)
	if err != nil {
		return job, err
	}
	job.WindowSize, job.Grace = s.o.WindowSize, s.o.Grace
	job.ReportCommits = 250 * time.Millisecond
	// Static membership (group.instance.id) for every system: the worker
	// restarted after the SIGKILL rejoins as the same member at once
	// instead of waiting out the dead one's session (45 s by default in
	// Kafka Streams), so the restart measures the systems, not the timeout.
	job.Instance = "sweep"
	if w == "sweep" {
		job.WindowOutput = job.AppID + "-windows"
		resp, err := s.adm.CreateTopics(ctx, s.o.Partitions, 1, nil, job.WindowOutput)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			err = waitTopics(ctx, s.adm, []string{job.WindowOutput})
		}
		if err != nil {
			return job, fmt.Errorf("bench sweep: window output topic: %w", err)
		}
	}
	return job, nil
}

// produceBatch writes n inputs as fast as the broker takes them, with
// skewed event times, and returns when all are acknowledged.
func (s *sweeper) produceBatch(ctx context.Context, job Job, n int, seed uint64) error {
	ks := newZipfKeyspace(seed, s.o.Keys, sweepZipf)
	sk := newSkewer(seed, s.o.Skew)
	errs := make(chan error, 1)
	for i := range n {
		now := time.Now()
		s.cl.Produce(ctx, inputRecord(job, ks.keys[ks.zipf.Uint64()], i, sk.stamp(now)), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := s.cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errs:
		return fmt.Errorf("bench sweep: produce: %w", err)
	default:
		return nil
	}
}

// awaitCommitted waits until the group's committed offsets reach the
// input's end.
func (s *sweeper) awaitCommitted(ctx context.Context, job Job, timeout time.Duration) error {
	_, err := throughput(ctx, s.adm, job.AppID, job.Input, time.Now(), timeout)
	return err
}

// calibrate is the max throughput of sys on workload w: the system is
// started and warmed (WarmRecords processed, so a JVM has compiled its hot
// paths), then records inputs are produced as fast as the broker takes
// them while the system runs, and throughput is records over the time from
// the first produce until the group's committed offsets reach the end.
func (s *sweeper) calibrate(ctx context.Context, sys System, w string, records int) SweepCalibration {
	res := SweepCalibration{System: sys.Name, Workload: w, Records: records, WarmRecords: s.o.WarmRecords}
	s.progress(fmt.Sprintf("calibrate: %s on %s, %d warm-up then %d records with the producer running", sys.Name, w, s.o.WarmRecords, records))
	defer func() {
		if res.Error != "" {
			s.progress("  error: " + firstLine(res.Error))
		}
	}()
	job, err := s.sweepJob(ctx, w, sys)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer s.h.cleanup(job) // the window output too: it shares the application id's prefix
	p, err := sys.start(ctx, s.o.Env, job)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer p.stop()
	if err := s.produceBatch(ctx, job, s.o.WarmRecords, s.o.Seed); err == nil {
		err = s.awaitCommitted(ctx, job, 5*time.Minute)
	}
	if err != nil {
		res.Error = fmt.Sprintf("warm-up: %v", err)
		return res
	}
	if w == "sweep" {
		// The load base: measured with the runs' external consumer
		// reading both outputs, which shares the machine with the system.
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		go drainTopics(wctx, s.o.Brokers, job.Output, job.WindowOutput)
	}
	app0, aerr0 := readUsage(p.cmd.Process.Pid)
	brk0, _ := readUsage(s.o.BrokerPID)
	start := time.Now()
	produced := make(chan error, 1)
	go func() { produced <- s.produceBatch(ctx, job, records, s.o.Seed+1) }()
	err = <-produced
	res.ProduceRate = float64(records) / time.Since(start).Seconds()
	if err == nil {
		err = s.awaitCommitted(ctx, job, 10*time.Minute)
	}
	done := time.Now()
	app1, aerr1 := readUsage(p.cmd.Process.Pid)
	brk1, _ := readUsage(s.o.BrokerPID)
	if err == nil {
		err = errors.Join(aerr0, aerr1, p.exitedEarly())
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Throughput = float64(records) / done.Sub(start).Seconds()
	res.AppCPUPerRecordUs = float64((app1.CPU - app0.CPU).Microseconds()) / float64(records)
	if s.o.BrokerPID != 0 {
		res.BrokerCPUPerRecordUs = float64((brk1.CPU - brk0.CPU).Microseconds()) / float64(records)
	}
	s.progress(fmt.Sprintf("  %.0f records/s (producer %.0f/s), CPU per record: app %.1f µs, broker %.1f µs",
		res.Throughput, res.ProduceRate, res.AppCPUPerRecordUs, res.BrokerCPUPerRecordUs))
	return res
}

// run is one policy's continuous run through the schedule, its warm-up
// lengthened by extra.
func (s *sweeper) run(ctx context.Context, sys System, repeat int, capacity float64, extra time.Duration) (res SweepRun) {
	sch := s.o.schedule(capacity)
	sch.warmup += extra
	res = SweepRun{Policy: sys.Name, Repeat: repeat + 1, WarmupSec: sch.warmup.Seconds()}
	kill := fmt.Sprintf("SIGKILL %.0f%% into phase %d", 100*sch.killFrac, sch.killPhase+1)
	if s.o.NoKill {
		kill = "no SIGKILL"
	}
	settle, busy := s.settleBroker(ctx)
	res.SettleSec = settle.Seconds()
	s.progress(fmt.Sprintf("run: %s (repeat %d), %.0f s of input, %s; %s", sys.Name, repeat+1, sch.end().Seconds(), kill, settleText(settle, busy)))
	defer func() {
		if res.Error != "" {
			s.progress("  error: " + firstLine(res.Error))
		}
	}()
	job, err := s.sweepJob(ctx, "sweep", sys)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer s.h.cleanup(job) // the window output too: it shares the application id's prefix
	p, err := sys.start(ctx, s.o.Env, job)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	procs := []*process{p}
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stop()
			}
		}
	}()
	ks := newZipfKeyspace(s.o.Seed+2, s.o.Keys, sweepZipf)
	start := time.Now()
	book := newInputBook(start, ks.keys, s.o.Partitions)
	obs := newSweepObserver(sch, book, s.o.WindowSize+s.o.Grace)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watched := make(chan error, 1)
	go func() { watched <- obs.watch(wctx, s.o.Brokers, job.Output, job.WindowOutput) }()
	cpu := &cpuSampler{pid: p.cmd.Process.Pid, broker: s.o.BrokerPID}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go cpu.run(cctx, 200*time.Millisecond)

	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	driven := make(chan error, 1)
	go func() { driven <- s.drive(dctx, job, sch, ks, book) }()

	// The SIGKILL and restart, at the same offset for every policy.
	p2 := p
	if !s.o.NoKill {
		if !sleepCtx(ctx, time.Until(start.Add(sch.killAt()))) {
			return res
		}
		procs[0] = nil // killAndRestart owns it now
		if p2 = s.killAndRestart(ctx, sys, job, start, p, cpu, &res); p2 == nil {
			return res
		}
		procs = append(procs, p2)
	}

	if !sleepCtx(ctx, time.Until(start.Add(sch.end()))) {
		return res
	}
	dcancel()
	derr := <-driven
	if !sleepCtx(ctx, s.o.Drain) {
		return res
	}
	cpu.sample()
	ccancel()
	wcancel()
	werr := <-watched
	if err := p2.exitedEarly(); err != nil {
		res.Error = err.Error()
	} else if err := errors.Join(derr, werr); err != nil {
		res.Error = err.Error()
	}
	commits := [][]commitSample{p.events.commitSamples()}
	p.events.closeMoments(obs.closes)
	if p2 != p {
		commits = append(commits, p2.events.commitSamples())
		p2.events.closeMoments(obs.closes)
	}
	res.Phases = obs.phases(start, func(from, to time.Time) (float64, float64, time.Duration, time.Duration) {
		c, lat := commitsBetween(commits, from, to)
		app, br := cpu.between(from, to)
		return c, lat, app, br
	}, s.o.BrokerPID != 0)
	if err := obs.perSec.write(map[string]any{"policy": res.Policy, "repeat": res.Repeat}); err != nil && res.Error == "" {
		res.Error = err.Error()
	}
	for _, ph := range res.Phases {
		s.progress(fmt.Sprintf("  phase %d (%.0f%%, %.0f/s): p50 %.1f ms, p99 %.1f ms, goodput %.0f/s, close→visible p99 %.1f ms (in app %.1f ms; %d finals), %.1f commits/s",
			ph.Phase, 100*ph.Load, ph.Rate, ph.P50, ph.P99, ph.Goodput, ph.CloseP99, ph.AppCloseP99, ph.Finals, ph.CommitsPerSec))
	}
	return res
}

// killAndRestart SIGKILLs p (a run started at start) and starts the policy
// again: the restarted process, or nil when the run ends there (res.Error
// says why).
func (s *sweeper) killAndRestart(ctx context.Context, sys System, job Job, start time.Time, p *process, cpu *cpuSampler, res *SweepRun) *process {
	if err := p.exitedEarly(); err != nil {
		res.Error = err.Error()
		p.stop()
		return nil
	}
	kill := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	res.KillAtSec = kill.Sub(start).Seconds()
	p2, err := sys.launch(s.o.Env, job)
	if err == nil {
		// From its first instant: a restart can fill most of a short
		// phase, and its CPU belongs there.
		var used time.Duration
		if st := p.cmd.ProcessState; st != nil {
			used = st.UserTime() + st.SystemTime()
		}
		cpu.switchTo(p2.cmd.Process.Pid, used)
		err = p2.awaitReady(ctx, sys.Name)
	}
	if err != nil {
		res.Error = fmt.Sprintf("restart after SIGKILL: %v", err)
		return nil
	}
	res.RestartSec = time.Since(kill).Seconds()
	s.progress(fmt.Sprintf("  SIGKILLed at %.1f s, restarted (ready) %.2f s later", res.KillAtSec, res.RestartSec))
	return p2
}

// drive produces the schedule's input: per 5 ms tick, as many records as
// are due, each booked (produce time per key, event-time steps per
// partition) before it is produced.
func (s *sweeper) drive(ctx context.Context, job Job, sch sweepSchedule, ks *keyspace, book *inputBook) error {
	sk := newSkewer(s.o.Seed+3, s.o.Skew)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	var sent int64
	var errMu sync.Mutex
	var perr error
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.cl.Flush(fctx)
			errMu.Lock()
			defer errMu.Unlock()
			return perr
		case <-t.C:
		}
		due := sch.due(time.Since(book.start))
		book.mu.Lock()
		batch := make([]*kgo.Record, 0, max(0, due-sent))
		for ; sent < due; sent++ {
			now := time.Now()
			k := int(ks.zipf.Uint64())
			ts := sk.stamp(now)
			book.add(k, now, ts)
			batch = append(batch, inputRecord(job, ks.keys[k], int(sent), ts))
		}
		book.mu.Unlock()
		for _, r := range batch {
			s.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					errMu.Lock()
					if perr == nil {
						perr = fmt.Errorf("bench sweep: produce: %w", err)
					}
					errMu.Unlock()
				}
			})
		}
	}
}

// sweepObserver is the external read_committed consumer of a run's two
// outputs, accumulating per phase.
type sweepObserver struct {
	sch     sweepSchedule
	book    *inputBook
	closeAt time.Duration // window size + grace
	stale   []*hdrhistogram.Histogram
	outputs []int64 // count outputs by input phase
	recv    []int64 // count outputs by receive phase
	unknown int64   // outputs the book cannot place
	finals  []windowFinal
	// maxSeen is per key the highest count seen: every input of the key up
	// to it is covered by a visible output.
	maxSeen []int64
	stopped time.Duration // when the watcher stopped, offset from start
	// perSec is, with TIDEMARK_BENCH_SERIES set, the staleness histogram
	// per second of input time (sweep_series.go).
	perSec secondSeries
	// closes are the tidemark workers' window closes (sweep_close.go),
	// filled in before phases.
	closes appCloses
}

type windowFinal struct {
	part       int32
	endMs      int64
	recvOffset time.Duration
}

func newSweepObserver(sch sweepSchedule, book *inputBook, closeAt time.Duration) *sweepObserver {
	o := &sweepObserver{sch: sch, book: book, closeAt: closeAt, closes: appCloses{},
		outputs: make([]int64, len(sch.loads)), recv: make([]int64, len(sch.loads)), maxSeen: make([]int64, len(book.times)),
		perSec: newSecondSeries()}
	for range sch.loads {
		o.stale = append(o.stale, hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3))
	}
	return o
}

func (o *sweepObserver) watch(ctx context.Context, brokers []string, countTopic, windowTopic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(countTopic, windowTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			o.book.mu.Lock()
			o.stopped = now.Sub(o.book.start)
			o.book.mu.Unlock()
			return nil
		}
		if err := fetchErr(fs); err != nil {
			return err
		}
		recvAt := now.Sub(o.book.start)
		rk := o.sch.phaseOf(recvAt)
		o.book.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			k, start, windowed, ok := keyIndex(r.Key)
			if !ok {
				o.unknown++
				return
			}
			if windowed {
				if k >= 0 && k < len(o.book.partOf) {
					o.finals = append(o.finals, windowFinal{o.book.partOf[k], start + o.closeAt.Milliseconds(), recvAt})
				}
				return
			}
			n, err := parseCount(r.Value)
			at, found := o.book.produced(k, n)
			if err != nil || !found {
				o.unknown++
				return
			}
			if rk >= 0 && rk < len(o.recv) {
				o.recv[rk]++
			}
			o.maxSeen[k] = max(o.maxSeen[k], n)
			if ik := o.sch.phaseOf(at); ik >= 0 && ik < len(o.outputs) {
				o.outputs[ik]++
				_ = o.stale[ik].RecordValue(max(recvAt-at, 0).Microseconds())
			}
			o.perSec.observe(int(at.Seconds()), max(recvAt-at, 0).Microseconds())
		})
		o.book.mu.Unlock()
	}
}

// drainTopics reads topics read_committed until ctx is done, the load
// the sweep's watcher puts on the machine, without measuring.
func drainTopics(ctx context.Context, brokers []string, topics ...string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { _, _, _, _ = keyIndex(r.Key) })
	}
}

func parseCount(v []byte) (int64, error) {
	var n int64
	if len(v) == 0 {
		return 0, errors.New("empty count")
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("count %q", v)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// phases summarises the run per phase; usage returns commits, median
// commit latency (ms), app and broker CPU between two instants.
func (o *sweepObserver) phases(start time.Time, usage func(from, to time.Time) (float64, float64, time.Duration, time.Duration), broker bool) []SweepPhase {
	o.book.mu.Lock()
	defer o.book.mu.Unlock()
	closeHist := make([]*hdrhistogram.Histogram, len(o.sch.loads))
	appHist := make([]*hdrhistogram.Histogram, len(o.sch.loads))
	finals := make([]int64, len(o.sch.loads))
	for i := range closeHist {
		closeHist[i] = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
		appHist[i] = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	}
	for _, f := range o.finals {
		at, ok := o.book.closedAt(f.part, f.endMs)
		if !ok {
			continue // closed by no input: cannot happen for a final, but be safe
		}
		if k := o.sch.phaseOf(at); k >= 0 && k < len(finals) {
			finals[k]++
			_ = closeHist[k].RecordValue(max(f.recvOffset-at, 0).Microseconds())
			recv := o.book.start.Add(f.recvOffset)
			if c, ok := o.closes.at(windowClose{f.part, f.endMs}, recv); ok {
				_ = appHist[k].RecordValue(max(recv.Sub(c), 0).Microseconds())
			}
		}
	}
	inputs := make([]int64, len(o.sch.loads))
	unseen := make([]int64, len(o.sch.loads))
	for key, ts := range o.book.times {
		for i, at := range ts {
			k := o.sch.phaseOf(time.Duration(at))
			if k < 0 || k >= len(inputs) {
				continue
			}
			inputs[k]++
			if int64(i) >= o.maxSeen[key] && o.stopped > 0 {
				// No visible output covers this input by the end: its
				// staleness is at least the time until then. Counting it
				// so keeps a system that is still behind from looking
				// fresher than one that caught up.
				unseen[k]++
				_ = o.stale[k].RecordValue(max(o.stopped-time.Duration(at), 0).Microseconds())
			}
		}
	}
	var out []SweepPhase
	for k, l := range o.sch.loads {
		from, to := start.Add(o.sch.phaseStart(k)), start.Add(o.sch.phaseStart(k+1))
		sec := o.sch.phase.Seconds()
		commits, lat, app, br := usage(from, to)
		ph := SweepPhase{Phase: k + 1, Load: l, Rate: l * o.sch.capacity, Inputs: inputs[k], Outputs: o.outputs[k], Unseen: unseen[k],
			Goodput: float64(o.recv[k]) / sec, Finals: finals[k], CommitsPerSec: commits / sec, CommitLatencyMs: lat,
			AppCPUSec: app.Seconds()}
		if o.outputs[k]+unseen[k] > 0 {
			ph.P50, ph.P99 = msq(o.stale[k], 50), msq(o.stale[k], 99)
		}
		if finals[k] > 0 {
			ph.CloseP50, ph.CloseP99 = msq(closeHist[k], 50), msq(closeHist[k], 99)
		}
		if appHist[k].TotalCount() > 0 {
			ph.AppCloseP50, ph.AppCloseP99 = msq(appHist[k], 50), msq(appHist[k], 99)
		}
		if inputs[k] > 0 {
			ph.AppCPUPerRecordUs = float64(app.Microseconds()) / float64(inputs[k])
			if broker {
				ph.BrokerCPUSec = br.Seconds()
				ph.BrokerCPUPerRecordUs = float64(br.Microseconds()) / float64(inputs[k])
			}
		}
		out = append(out, ph)
	}
	return out
}

func msq(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }

// probeTxnFloor commits ten one-record transactions on a scratch topic and
// returns the medians of the time from the commit's return until a
// read_committed consumer has the record (the fetch floor) and of the
// commit (EndTxn) itself, in ms.
func probeTxnFloor(ctx context.Context, brokers []string, h *harness) (floorMs, commitMs float64, err error) {
	job, err := h.job(ctx, "probe", System{Name: "probe"})
	if err != nil {
		return 0, 0, err
	}
	defer h.cleanup(job)
	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(job.AppID+"-probe"), kgo.DefaultProduceTopic(job.Input))
	if err != nil {
		return 0, 0, err
	}
	defer tx.Close()
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(job.Input), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return 0, 0, err
	}
	defer rd.Close()
	seen := make(chan time.Time, 64)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() {
		for rctx.Err() == nil {
			fs := rd.PollFetches(rctx)
			now := time.Now()
			fs.EachRecord(func(*kgo.Record) { seen <- now })
		}
	}()
	var floors, commits []float64
	for i := range 12 {
		if err := tx.BeginTransaction(); err != nil {
			return 0, 0, err
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("probe")}).FirstErr(); err != nil {
			return 0, 0, err
		}
		c0 := time.Now()
		if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return 0, 0, err
		}
		c1 := time.Now()
		select {
		case v := <-seen:
			if i >= 2 { // the first ones include metadata and the reader's start
				floors = append(floors, float64(max(v.Sub(c1), 0).Microseconds())/1000)
				commits = append(commits, float64(c1.Sub(c0).Microseconds())/1000)
			}
		case <-time.After(10 * time.Second):
			return 0, 0, errors.New("probe record not visible within 10 s")
		}
	}
	return median(floors), median(commits), nil
}
