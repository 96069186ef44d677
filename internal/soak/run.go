package soak

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure one scenario run.
type Options struct {
	// Seed is the campaign seed; each scenario derives its own from it and
	// its name (ScenarioSeed), so a subset of scenarios replays the same
	// schedules.
	Seed uint64
	// Short picks the CI sizes of every scenario (fewer kills, a shorter
	// pause); the full campaign otherwise.
	Short bool
	// Scale multiplies every phase of a schedule (not the fault counts).
	// Default 1.
	Scale float64
	// Rate of input records per second; Keys the key space; PoisonFraction
	// of the input are poison pills. Defaults 400/s, 2000 keys, 0.5%.
	Rate           int
	Keys           int
	PoisonFraction float64
	// Bin is the countsvc binary (BuildService).
	Bin string
	// Dir holds the instances' state directories and logs.
	Dir string
	// CatchUp bounds the wait for the final counts once input stops.
	// Default 2 minutes.
	CatchUp time.Duration
	// SessionTimeout is the service's consumer group session timeout.
	// Default 6s: shorter than the broker pause, and than the storm's
	// holds, so dead members are noticed while the faults go on.
	SessionTimeout time.Duration
	// Guarantee of the service: "" (exactly-once, its default), or
	// "at_least_once" to check that the checker catches duplicates.
	Guarantee string
	// Threads is each service instance's stream threads; 0: its default.
	Threads int
	// RestoreModeMinOffsets is the service's
	// changelog.Options.RestoreModeMinOffsets. Default 1000, so that the
	// restores of wiped and moved tasks, a few thousand changelog records
	// here, take the sorted-rebuild path a large state takes; negative:
	// the service's own default (100,000: every restore here is written
	// record by record).
	RestoreModeMinOffsets int64
	// Standbys is each instance's standby replicas per stateful task
	// (processor.WithStandbyReplicas); 0: none.
	Standbys int
	// Snapshots gives the fleet one file:// snapshot store
	// (processor.WithSnapshotStore), in the scenario's directory.
	Snapshots bool
	// ProbingInterval is the service's probing rebalance interval
	// (processor.WithProbingRebalanceInterval); 0: its default (10 min,
	// longer than a scenario).
	ProbingInterval time.Duration
	// CheckpointMaxInterval caps the service's checkpoint interval, and so
	// the time between its snapshots. Default with Snapshots 5s (the
	// service's own policy checkpoints minutes apart: no snapshot would be
	// written within a scenario); without, the service's default.
	CheckpointMaxInterval time.Duration
	// Damage is the chance that the kill campaign, restarting a killed
	// instance with its state, damages that state first (Fleet.Damage);
	// a third of it, the chance that a round removes the state directory
	// of a running instance instead of killing one (Fleet.RemoveState).
	// Default DefaultDamage; negative: never.
	Damage float64
	// DeleteTopics deletes the scenario's topics (its own and the
	// service's internal ones) after a pass: for a shared broker.
	DeleteTopics bool
	// Logf receives progress lines. Default: stderr.
	Logf func(format string, args ...any)
}

// DefaultRestoreModeMinOffsets is Options.RestoreModeMinOffsets' default.
const DefaultRestoreModeMinOffsets = 1000

// DefaultSnapshotCheckpointInterval is Options.CheckpointMaxInterval's
// default with Snapshots.
const DefaultSnapshotCheckpointInterval = 5 * time.Second

// DefaultDamage is Options.Damage's default.
const DefaultDamage = 0.3

func (o *Options) ensureDefaults() {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Rate == 0 {
		o.Rate = 400
	}
	if o.Keys == 0 {
		o.Keys = 2000
	}
	if o.PoisonFraction == 0 {
		o.PoisonFraction = 0.005
	}
	if o.CatchUp == 0 {
		o.CatchUp = 2 * time.Minute
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 6 * time.Second
	}
	if o.RestoreModeMinOffsets == 0 {
		o.RestoreModeMinOffsets = DefaultRestoreModeMinOffsets
	}
	if o.Damage == 0 {
		o.Damage = DefaultDamage
	}
	if o.Snapshots && o.CheckpointMaxInterval == 0 {
		o.CheckpointMaxInterval = DefaultSnapshotCheckpointInterval
	}
	if o.Logf == nil {
		o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
}

// Scenario is a fault schedule. Input flows with poison pills during all of
// it; the run then stops producing, waits for the service to catch up,
// stops it gracefully and checks every output.
type Scenario struct {
	Name  string
	About string
	// BrokerFaults scenarios need a HurtableBroker.
	BrokerFaults bool
	// Proxied scenarios run every instance behind a netfault.Proxy of its own
	// (ServiceConfig.Proxied), to partition it from the broker.
	Proxied  bool
	schedule func(ctx context.Context, r *Run) error
}

// ScenarioSeed derives a scenario's seed from the campaign seed.
func ScenarioSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return seed ^ h.Sum64()
}

// Run is one scenario in progress: the schedule drives it.
type Run struct {
	Opts    Options
	Seed    uint64
	Rand    *mrand.Rand
	Fleet   *Fleet
	Broker  Broker
	start   time.Time
	nextID  int
	mu      sync.Mutex
	brKills int
	pauses  int
	damages int
	events  []string
}

// Logf logs a line stamped with the time since the scenario started.
func (r *Run) Logf(format string, args ...any) {
	line := fmt.Sprintf("+%6.1fs ", time.Since(r.start).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.events = append(r.events, line)
	r.mu.Unlock()
	r.Opts.Logf("%s", line)
}

// Between returns a random duration in [lo, hi], scaled.
func (r *Run) Between(lo, hi time.Duration) time.Duration {
	return time.Duration(float64(r.Unscaled(lo, hi)) * r.Opts.Scale)
}

// Unscaled returns a random duration in [lo, hi], not scaled: for a
// fault whose length matters against the service's timeouts.
func (r *Run) Unscaled(lo, hi time.Duration) time.Duration {
	d := lo
	if hi > lo {
		d += time.Duration(r.Rand.Int64N(int64(hi - lo)))
	}
	return d
}

// Pick returns short or full by the run's size.
func (r *Run) Pick(short, full int) int {
	if r.Opts.Short {
		return short
	}
	return full
}

// NewInstanceID names a new instance slot.
func (r *Run) NewInstanceID() string {
	r.nextID++
	return fmt.Sprintf("i%d", r.nextID)
}

func (r *Run) Start(id string) error {
	if err := r.Fleet.Start(id); err != nil {
		return err
	}
	r.Logf("start %s", id)
	return nil
}

func (r *Run) Kill(id string) error {
	if err := r.Fleet.Kill(id); err != nil {
		return err
	}
	r.Logf("SIGKILL %s", id)
	return nil
}

func (r *Run) Term(id string) error {
	t := time.Now()
	if err := r.Fleet.Term(id, 30*time.Second); err != nil {
		return err
	}
	r.Logf("SIGTERM %s: stopped in %s", id, time.Since(t).Round(time.Millisecond))
	return nil
}

func (r *Run) hurtable() (HurtableBroker, error) {
	b, ok := r.Broker.(HurtableBroker)
	if !ok {
		return nil, errors.New("soak: this scenario needs a private broker it may hurt")
	}
	return b, nil
}

// KillBroker SIGKILLs the broker, waits down, and starts it again.
func (r *Run) KillBroker(ctx context.Context, down time.Duration) error {
	b, err := r.hurtable()
	if err != nil {
		return err
	}
	if err := b.Kill(); err != nil {
		return err
	}
	r.mu.Lock()
	r.brKills++
	r.mu.Unlock()
	r.Logf("broker SIGKILL; down for %s", down.Round(time.Millisecond))
	if err := sleep(ctx, down); err != nil {
		// Leave the broker running for the checks whatever happens.
		_ = b.Start(context.WithoutCancel(ctx))
		return err
	}
	t := time.Now()
	if err := b.Start(ctx); err != nil {
		return err
	}
	r.Logf("broker restarted, answering after %s", time.Since(t).Round(time.Millisecond))
	return nil
}

// Freeze suspends instance id (SIGSTOP) for d; then it resumes it, or,
// with kill, SIGKILLs it still frozen and starts it again after a second
// (a supervisor that gave up on a hung process). A cancelled ctx still
// resumes it.
func (r *Run) Freeze(ctx context.Context, id string, d time.Duration, kill bool) error {
	if err := r.Fleet.Suspend(id); err != nil {
		return err
	}
	r.Logf("SIGSTOP %s for %s%s", id, d.Round(time.Millisecond), map[bool]string{true: ", then SIGKILL"}[kill])
	err := sleep(ctx, d)
	if kill && err == nil {
		if err := r.Kill(id); err != nil {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		return r.Start(id)
	}
	if rerr := r.Fleet.Resume(id); rerr != nil {
		return rerr
	}
	r.Logf("SIGCONT %s", id)
	return err
}

// Partition cuts instance id off the broker for d (its peers still reach
// it), then heals the partition. A cancelled ctx still heals it.
func (r *Run) Partition(ctx context.Context, id string, d time.Duration) error {
	if err := r.Fleet.Cut(id); err != nil {
		return err
	}
	r.Logf("partition %s from the broker for %s", id, d.Round(time.Millisecond))
	err := sleep(ctx, d)
	if herr := r.Fleet.Heal(id); herr != nil {
		return herr
	}
	r.Logf("healed %s", id)
	return err
}

// damaged counts a damage done to a stopped instance's state.
func (r *Run) damaged() {
	r.mu.Lock()
	r.damages++
	r.mu.Unlock()
}

// PauseBroker freezes the broker (SIGSTOP) for d, then resumes it.
func (r *Run) PauseBroker(ctx context.Context, d time.Duration) error {
	b, err := r.hurtable()
	if err != nil {
		return err
	}
	if err := b.Pause(); err != nil {
		return err
	}
	r.mu.Lock()
	r.pauses++
	r.mu.Unlock()
	r.Logf("broker SIGSTOP for %s", d.Round(time.Millisecond))
	err = sleep(ctx, d)
	if rerr := b.Resume(); rerr != nil {
		return rerr
	}
	r.Logf("broker SIGCONT")
	return err
}

// queryStore is the service's count store; queryEvery how often the
// querier asks an instance for a key.
const (
	queryStore = "counts"
	queryEvery = 100 * time.Millisecond
)

// Result is one scenario's outcome.
type Result struct {
	Scenario string
	Seed     uint64
	Elapsed  time.Duration
	Produced Produced
	Report
	Fleet          FleetStats
	Queries        QueryReport
	State          StateReport // the changelog held to the input (statecheck.go); zero unless Drained
	BrokerKills    int
	BrokerPauses   int
	Damages        int           // stopped instances' states damaged (Fleet.Damage)
	CaughtUpAfter  time.Duration // since input stopped; -1 if it never did
	Drained        bool
	AckedMissing   int // acknowledged records the input log does not hold
	UnackedInLog   int // records in the input log the producer saw fail
	Failures       []string
	Notes          []string
	Dir            string
	BrokerLog      string
	ScheduleErr    string
	Events         []string
	ServiceErrors  map[string][]string // per instance log: its last error lines
	InputRecords   int
	ScenarioTopics [3]string
}

// Pass reports whether the scenario found nothing wrong.
func (r Result) Pass() bool { return len(r.Failures) == 0 }

// RunScenario runs sc against b and checks it. It returns an error only
// when the run could not be set up or checked at all; everything the
// service got wrong is in the Result.
func RunScenario(ctx context.Context, sc Scenario, b Broker, o Options) (Result, error) {
	o.ensureDefaults()
	seed := ScenarioSeed(o.Seed, sc.Name)
	res := Result{Scenario: sc.Name, Seed: seed, CaughtUpAfter: -1}
	if hb, ok := b.(HurtableBroker); ok {
		res.BrokerLog = hb.LogFile()
	}
	r := &Run{Opts: o, Seed: seed, Rand: mrand.New(mrand.NewPCG(seed, 0x5eed)), Broker: b, start: time.Now()}
	replay := fmt.Sprintf("go run ./internal/soak/cmd/soak --seed %d --scenarios %s", o.Seed, sc.Name)
	if o.Short {
		replay += " --short"
	}
	if o.Guarantee != "" {
		replay += " --guarantee " + o.Guarantee
	}
	if o.Threads > 0 {
		replay += fmt.Sprintf(" --threads %d", o.Threads)
	}
	if o.RestoreModeMinOffsets != DefaultRestoreModeMinOffsets {
		replay += fmt.Sprintf(" --restore-mode-min-offsets %d", o.RestoreModeMinOffsets)
	}
	if o.Scale != 1 {
		replay += fmt.Sprintf(" --duration %g", o.Scale)
	}
	replay += o.HAFlags()
	r.Logf("scenario %s: seed %d (campaign seed %d; replay: %s)", sc.Name, seed, o.Seed, replay)

	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	base := fmt.Sprintf("soak-%s-%x", sc.Name, suffix)
	in, out, dlq := base+"-in", base+"-out", base+"-dlq"
	changelogTopic := base + "-" + queryStore + "-changelog" // countsvc's count store, app base
	res.ScenarioTopics = [3]string{in, out, dlq}
	res.Dir = filepath.Join(o.Dir, sc.Name)
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return res, err
	}
	if err := createTopics(ctx, b.Bootstrap(), map[string]int32{in: 4, out: 4, dlq: 2}); err != nil {
		return res, err
	}
	var snapStore string
	if o.Snapshots {
		snapStore = "file://" + filepath.Join(res.Dir, "snapshots")
	}

	r.Fleet = NewFleet(ServiceConfig{Bin: o.Bin, Brokers: b.Bootstrap(), App: base, In: in, Out: out, DLQ: dlq, Dir: res.Dir, SessionTimeout: o.SessionTimeout, Guarantee: o.Guarantee, Threads: o.Threads,
		RestoreModeMinOffsets: max(o.RestoreModeMinOffsets, 0), Standbys: o.Standbys, SnapshotStore: snapStore, ProbingInterval: o.ProbingInterval,
		CheckpointMaxInterval: o.CheckpointMaxInterval, Proxied: sc.Proxied}, r.Logf)
	defer r.Fleet.KillAll()

	w, err := NewWatcher(b.Bootstrap(), in, out, dlq, r.start)
	if err != nil {
		return res, err
	}
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	wdone := make(chan struct{})
	go func() { defer close(wdone); w.Run(wctx) }()
	defer func() { wcancel(); <-wdone; w.Close() }()

	p, err := NewProducer(b.Bootstrap(), ProducerConfig{Topic: in, Rate: o.Rate, Keys: o.Keys, PoisonFraction: o.PoisonFraction, Seed: seed})
	if err != nil {
		return res, err
	}
	pctx, pcancel := context.WithCancel(ctx)
	pdone := make(chan struct{})
	go func() { defer close(pdone); p.Run(pctx) }()
	defer func() { pcancel(); <-pdone; p.Stop(0) }() // an aborted run
	w.Measure(true)
	qr := NewQuerier(r.Fleet, queryStore, in, out, o.Keys, queryEvery, seed, r.start)
	qctx, qcancel := context.WithCancel(ctx)
	qdone := make(chan struct{})
	go func() { defer close(qdone); qr.Run(qctx) }()
	defer func() { qcancel(); <-qdone }()
	r.Logf("producing %d records/s over %d keys into %s (4 partitions), %.2f%% poison pills", o.Rate, o.Keys, in, 100*o.PoisonFraction)

	// The schedule: faults while input flows.
	if err := sc.schedule(ctx, r); err != nil {
		res.ScheduleErr = err.Error()
		res.Failures = append(res.Failures, "schedule: "+err.Error())
		r.Logf("schedule failed: %v", err)
	}

	pcancel()
	<-pdone
	p.Stop(30 * time.Second)
	w.Measure(false)
	stopped := time.Now()
	res.Produced = p.Produced()
	r.Logf("input stopped: %d records acknowledged (%d sent, %d failed)", res.Produced.Acked, res.Produced.Sent, res.Produced.Failed)

	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
	log, err := ScanInput(sctx, b.Bootstrap(), in)
	scancel()
	if err != nil {
		return res, err
	}
	res.InputRecords = log.Records
	res.AckedMissing, res.UnackedInLog = compareInput(res.Produced, log)

	// Wait for the final counts, bounded.
	var behind, missing, poisonMissing int
	lastLog := time.Now()
	for {
		behind, missing, poisonMissing = w.Progress(log)
		if behind == 0 && poisonMissing == 0 {
			res.CaughtUpAfter = time.Since(stopped)
			r.Logf("caught up %s after input stopped: %d outputs", res.CaughtUpAfter.Round(time.Millisecond), w.Outputs())
			break
		}
		if time.Since(stopped) > o.CatchUp {
			r.Logf("NOT caught up %s after input stopped: %d keys behind by %d counts, %d poison pills not dead-lettered", o.CatchUp, behind, missing, poisonMissing)
			break
		}
		if time.Since(lastLog) > 10*time.Second {
			r.Logf("waiting for the service: %d keys behind by %d counts, %d poison pills not dead-lettered, running %v", behind, missing, poisonMissing, r.Fleet.Running())
			lastLog = time.Now()
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return res, ctx.Err()
		}
	}

	qcancel()
	<-qdone
	r.Fleet.StopAll(30 * time.Second)
	r.Logf("service stopped")
	// Drain: barriers behind everything the service committed; the live
	// watcher must reach them, then a fresh reader reads both topics from
	// the start to the barriers, and the verdict comes from that read.
	dctx, dcancel := context.WithTimeout(ctx, 90*time.Second)
	defer dcancel()
	final := w
	bar, err := WriteBarriers(dctx, b.Bootstrap(), out, dlq, changelogTopic)
	if err != nil {
		return res, err
	}
	if err := w.Reach(dctx, bar); err != nil {
		res.Failures = append(res.Failures, "drain: "+err.Error())
		r.Logf("drain: %v", err)
	} else {
		res.Drained = true
		fresh, err := NewWatcher(b.Bootstrap(), in, out, dlq, r.start)
		if err != nil {
			return res, err
		}
		fctx, fcancel := context.WithCancel(context.WithoutCancel(ctx))
		fdone := make(chan struct{})
		go func() { defer close(fdone); fresh.Run(fctx) }()
		err = fresh.Reach(dctx, bar)
		fcancel()
		<-fdone
		fresh.Close()
		if err != nil {
			return res, fmt.Errorf("soak: final read of the outputs: %w", err)
		}
		if lo, fo := w.Outputs(), fresh.Outputs(); lo != fo {
			res.Failures = append(res.Failures, fmt.Sprintf("the output log changed under the reader: read %d outputs live, %d from the start at the end", lo, fo))
		}
		fresh.maxStall, fresh.stallEnd = w.Stall()
		final = fresh
		r.Logf("final read from the start: %d outputs", fresh.Outputs())
	}
	wcancel()
	<-wdone

	res.Report = final.Report(log)
	if res.Drained {
		cl, err := ReadChangelog(dctx, b.Bootstrap(), changelogTopic, bar)
		if err != nil {
			return res, fmt.Errorf("soak: state check: %w", err)
		}
		committed, err := committedOffsets(dctx, b.Bootstrap(), base, in)
		if err != nil {
			return res, fmt.Errorf("soak: state check: %w", err)
		}
		res.State = CheckState(cl, log, in, committed)
		r.Logf("state check: %s", res.State)
	}
	qAnswers, qFrontiers, qStatuses := qr.Answers()
	res.Queries = CheckQueries(qAnswers, qStatuses, log)
	if res.Drained {
		res.Queries.CheckFrontiers(qFrontiers, log, final.OutputOf)
	}
	res.Fleet = r.Fleet.Stats()
	r.mu.Lock()
	res.BrokerKills, res.BrokerPauses, res.Damages = r.brKills, r.pauses, r.damages
	res.Events = append(res.Events, r.events...)
	r.mu.Unlock()
	res.Elapsed = time.Since(r.start)
	res.judge()
	if o.DeleteTopics && res.Pass() {
		if err := deleteTopics(ctx, b.Bootstrap(), base); err != nil {
			r.Logf("delete topics: %v", err)
		}
	}
	if !res.Pass() {
		res.ServiceErrors = map[string][]string{}
		for _, l := range res.Fleet.Logs {
			res.ServiceErrors[l] = grepLines(l, 16, "level=ERROR", "level=WARN", "panic", "last stable offset", "rebuilding store", "=== soak")
		}
	}
	return res, nil
}

// HAFlags are the soak command's flags for the standby and snapshot
// options set, for replay lines.
func (o Options) HAFlags() string {
	var s string
	if o.Standbys > 0 {
		s += fmt.Sprintf(" --standbys %d", o.Standbys)
	}
	if o.Snapshots {
		s += " --snapshots"
	}
	if o.ProbingInterval > 0 {
		s += " --probing-interval " + o.ProbingInterval.String()
	}
	if o.CheckpointMaxInterval > 0 && !(o.Snapshots && o.CheckpointMaxInterval == DefaultSnapshotCheckpointInterval) {
		s += " --checkpoint-max-interval " + o.CheckpointMaxInterval.String()
	}
	return s
}

// judge turns the report into failures.
func (res *Result) judge() {
	rp := res.Report
	fail := func(cond bool, format string, args ...any) {
		if cond {
			res.Failures = append(res.Failures, fmt.Sprintf(format, args...))
		}
	}
	fail(rp.Lost > 0, "lost: %d counts short on %d keys", rp.Lost, rp.KeysShort)
	fail(rp.Duplicated > 0, "duplicated: %d counts over on %d keys (%d keys never produced)", rp.Duplicated, rp.KeysOver+rp.Unexpected, rp.Unexpected)
	fail(rp.Decreases > 0, "decreasing outputs: %d", rp.Decreases)
	fail(rp.Repeats > 0, "repeated outputs: %d", rp.Repeats)
	fail(rp.Gaps > 0, "gaps in output sequences: %d", rp.Gaps)
	fail(rp.Malformed > 0, "malformed outputs: %d", rp.Malformed)
	fail(rp.Misrouted > 0, "outputs of one key in several partitions: %d", rp.Misrouted)
	fail(rp.PoisonMissing > 0, "poison pills not dead-lettered: %d of %d", rp.PoisonMissing, rp.PoisonInLog)
	fail(rp.PoisonDuplicated > 0, "poison pills dead-lettered more than once: %d extra", rp.PoisonDuplicated)
	fail(rp.DeadLetterWrong > 0, "dead-letter records that are not poison pills: %d", rp.DeadLetterWrong)
	fail(res.Queries.Wrong > 0, "interactive queries answered counts that are not the input's below the position they name: %d of %d", res.Queries.Wrong, res.Queries.Checked)
	fail(res.Queries.Checked == 0, "no interactive query was answered (%s)", res.Queries)
	fail(res.Queries.FrontierWrong > 0, "frontier answers that claimed outputs committed before they were: %d of %d", res.Queries.FrontierWrong, res.Queries.Frontiers)
	fail(res.Drained && res.Queries.FrontierCounts == 0, "no frontier query was answered with a watermark that covers an output (%s)", res.Queries)
	fail(!res.State.Clean(), "the changelog's state is not the input's below its positions: %s", res.State)
	fail(res.Drained && res.State.Positions == 0, "no changelog position record was checked (%s)", res.State)
	fail(len(res.Fleet.Crashes) > 0, "instances exited by themselves: %d", len(res.Fleet.Crashes))
	fail(len(res.Fleet.Unclean) > 0, "unclean stops on SIGTERM: %d", len(res.Fleet.Unclean))
	fail(res.AckedMissing > 0, "the broker lost %d acknowledged input records (not the service's fault)", res.AckedMissing)
	fail(res.CaughtUpAfter < 0, "the service did not catch up with the input in time")
	if res.UnackedInLog > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d input records failed at the producer but are in the log; the log is the expectation", res.UnackedInLog))
	}
}

// compareInput checks the producer's acknowledgements against the log.
func compareInput(p Produced, log InputLog) (ackedMissing, unacked int) {
	for k, n := range p.PerKey {
		if d := n - log.PerKey[k]; d > 0 {
			ackedMissing += d
		}
	}
	for k, n := range log.PerKey {
		if d := n - p.PerKey[k]; d > 0 {
			unacked += d
		}
	}
	acked := map[Coord]bool{}
	for _, c := range p.Poison {
		acked[c] = true
		if !log.Poison[c] {
			ackedMissing++
		}
	}
	for c := range log.Poison {
		if !acked[c] {
			unacked++
		}
	}
	return
}

func createTopics(ctx context.Context, brokers []string, topics map[string]int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for t, n := range topics {
		resp, err := adm.CreateTopic(ctx, n, 1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("soak: create topic %s: %w", t, err)
		}
	}
	// Start the service only once the broker serves the topics' metadata:
	// a missing topic at startup must be the service's finding, not a race
	// with the creation.
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	for {
		details, err := adm.ListTopics(ctx, names...)
		ready := err == nil
		for t, n := range topics {
			d, ok := details[t]
			if !ok || d.Err != nil || int32(len(d.Partitions)) != n {
				ready = false
				break
			}
			for _, p := range d.Partitions {
				if p.Err != nil || p.Leader < 0 {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("soak: topics %v not served by the broker: %v", names, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deleteTopics deletes every topic whose name starts with prefix+"-" and
// waits until the broker no longer lists them.
func deleteTopics(ctx context.Context, brokers []string, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		all, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, t := range all.Names() {
			if strings.HasPrefix(t, prefix+"-") {
				names = append(names, t)
			}
		}
		if len(names) == 0 {
			return nil
		}
		resp, err := adm.DeleteTopics(ctx, names...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete %v: %w", names, err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return fmt.Errorf("topics %v still listed", names)
		}
	}
}

// Summary formats results as the campaign's table, one line per scenario.
func Summary(results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %20s %8s %6s %8s %5s %5s %5s %5s %5s %9s %9s %7s %5s %5s %5s %5s %7s %9s %s\n",
		"scenario", "seed", "produced", "poison", "outputs", "lost", "dup", "decr", "rep", "gaps", "dlq", "queries", "states", "kills", "frz", "cut", "brk", "crashes", "max-stall", "result")
	for _, r := range results {
		verdict := "PASS"
		if !r.Pass() {
			verdict = "FAIL"
		}
		states := strconv.Itoa(r.State.Positions) // position records whose state matched the input
		if !r.State.Clean() {
			states = "WRONG"
		}
		fmt.Fprintf(&b, "%-14s %20d %8d %6d %8d %5d %5d %5d %5d %5d %9s %9s %7s %5d %5d %5d %5s %7d %9s %s\n",
			r.Scenario, r.Seed, r.ValidInLog+r.PoisonInLog, r.PoisonInLog, r.Outputs, r.Lost, r.Duplicated, r.Decreases, r.Repeats, r.Gaps,
			fmt.Sprintf("%d/%d", r.PoisonDeadLettered, r.PoisonInLog), fmt.Sprintf("%d/%d", r.Queries.Checked-r.Queries.Wrong, r.Queries.Checked), states, r.Fleet.Kills, r.Fleet.Freezes, r.Fleet.Cuts,
			fmt.Sprintf("%dk%dp", r.BrokerKills, r.BrokerPauses), len(r.Fleet.Crashes), r.MaxStall.Round(100*time.Millisecond), verdict)
	}
	return b.String()
}

// Details renders a result's failures with the evidence: anomaly
// examples, dead-letter issues, crashes and the service's log lines.
func (r Result) Details() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "scenario %s seed %d: %s in %s\n", r.Scenario, r.Seed, verdict, r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  input: %d records in the log (%d valid, %d poison); producer: %d sent, %d acknowledged, %d failed\n",
		r.InputRecords, r.ValidInLog, r.PoisonInLog, r.Produced.Sent, r.Produced.Acked, r.Produced.Failed)
	fmt.Fprintf(&b, "  outputs: %d checked; lost %d (%d keys), duplicated %d (%d keys), decreases %d, repeats %d, gaps %d, malformed %d, misrouted %d\n",
		r.Outputs, r.Lost, r.KeysShort, r.Duplicated, r.KeysOver+r.Unexpected, r.Decreases, r.Repeats, r.Gaps, r.Malformed, r.Misrouted)
	fmt.Fprintf(&b, "  dead letters: %d records, %d/%d poison pills, %d missing, %d extra copies, %d wrong\n",
		r.DeadLetterRecords, r.PoisonDeadLettered, r.PoisonInLog, r.PoisonMissing, r.PoisonDuplicated, r.DeadLetterWrong)
	catch := "never"
	if r.CaughtUpAfter >= 0 {
		catch = r.CaughtUpAfter.Round(time.Millisecond).String()
	}
	fmt.Fprintf(&b, "  faults: %d SIGKILLs, %d SIGSTOPs, %d partitions, %d SIGTERMs, %d states damaged (%d task DBs or state dirs moved aside), %d starts (%d sorted restores, %d snapshot loads, %d standby/warm-up starts), %d broker kills, %d broker pauses; max output stall %s (ended at +%s); caught up after input stopped: %s; drained: %v\n",
		r.Fleet.Kills, r.Fleet.Freezes, r.Fleet.Cuts, r.Fleet.Terms, r.Damages, r.Fleet.MovedAside, r.Fleet.Starts, r.Fleet.SortedRestores, r.Fleet.SnapshotLoads, r.Fleet.StandbyStarts, r.BrokerKills, r.BrokerPauses, r.MaxStall.Round(time.Millisecond), r.MaxStallAt.Round(100*time.Millisecond), catch, r.Drained)
	fmt.Fprintf(&b, "  queries: %s\n", r.Queries)
	for _, e := range r.Queries.Examples {
		fmt.Fprintf(&b, "    wrong: %s\n", e)
	}
	fmt.Fprintf(&b, "  state: %s\n", r.State)
	for _, e := range r.State.Examples {
		fmt.Fprintf(&b, "    wrong: %s\n", e)
	}
	for e, n := range r.Produced.Failures {
		fmt.Fprintf(&b, "  producer: %d records failed: %s\n", n, e)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL %s\n", f)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	for _, a := range r.Examples {
		fmt.Fprintf(&b, "    %s\n", a)
	}
	for _, a := range r.Finals {
		fmt.Fprintf(&b, "    %s\n", a)
	}
	for _, s := range r.DeadLetterIssues {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	reasons := make([]string, 0, len(r.Fleet.CrashReasons))
	for reason := range r.Fleet.CrashReasons {
		reasons = append(reasons, reason)
	}
	sort.Slice(reasons, func(i, j int) bool { return r.Fleet.CrashReasons[reasons[i]] > r.Fleet.CrashReasons[reasons[j]] })
	for _, reason := range reasons {
		fmt.Fprintf(&b, "    crashes: %d× %s\n", r.Fleet.CrashReasons[reason], reason)
	}
	for i, c := range r.Fleet.Crashes {
		if i == maxExamples {
			fmt.Fprintf(&b, "    … %d more crashes\n", len(r.Fleet.Crashes)-i)
			break
		}
		fmt.Fprintf(&b, "    crash: %s\n", c)
	}
	for _, c := range r.Fleet.Unclean {
		fmt.Fprintf(&b, "    unclean stop: %s\n", c)
	}
	if !r.Pass() {
		logs := make([]string, 0, len(r.ServiceErrors))
		for l := range r.ServiceErrors {
			logs = append(logs, l)
		}
		sort.Strings(logs)
		for _, l := range logs {
			fmt.Fprintf(&b, "  service log %s (last %d errors, warnings, restores to the last stable offset, rebuilds, starts):\n", l, len(r.ServiceErrors[l]))
			for _, line := range r.ServiceErrors[l] {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
		if r.BrokerLog != "" {
			fmt.Fprintf(&b, "  broker log: %s\n", r.BrokerLog)
		}
		fmt.Fprintf(&b, "  topics: %s; state and logs: %s\n", strings.Join(r.ScenarioTopics[:], ", "), r.Dir)
	}
	return b.String()
}

// RandomSeed returns a fresh campaign seed.
func RandomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	var s uint64
	for _, x := range b {
		s = s<<8 | uint64(x)
	}
	return s >> 1 // fits an int64 flag too
}

// Total sums results across scenarios.
type Total struct {
	Lost, Duplicated, Decreases, Repeats, Gaps      int
	Kills, Freezes, Cuts, BrokerKills, BrokerPauses int
	Crashes                                         int
	SortedRestores                                  int
	SnapshotLoads, StandbyStarts                    int
	Damages, MovedAside                             int
	// StatePositions counts the changelog position records checked,
	// StateWrong the state check's findings (StateReport).
	StatePositions, StateWrong int
}

func Totals(results []Result) Total {
	var t Total
	for _, r := range results {
		t.Lost += r.Lost
		t.Duplicated += r.Duplicated
		t.Decreases += r.Decreases
		t.Repeats += r.Repeats
		t.Gaps += r.Gaps
		t.Kills += r.Fleet.Kills
		t.Freezes += r.Fleet.Freezes
		t.Cuts += r.Fleet.Cuts
		t.BrokerKills += r.BrokerKills
		t.BrokerPauses += r.BrokerPauses
		t.Crashes += len(r.Fleet.Crashes)
		t.SortedRestores += r.Fleet.SortedRestores
		t.SnapshotLoads += r.Fleet.SnapshotLoads
		t.StandbyStarts += r.Fleet.StandbyStarts
		t.Damages += r.Damages
		t.MovedAside += r.Fleet.MovedAside
		t.StatePositions += r.State.Positions
		t.StateWrong += r.State.Findings()
	}
	return t
}
