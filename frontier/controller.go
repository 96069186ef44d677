package frontier

import (
	"maps"
	"math"
	"slices"
	"time"
)

// estimateAge is the time constant over which commit latency and cost
// samples age (meanDev.observeAged): at commit intervals well below it
// each sample moves the estimates by the usual per-sample gain; a sample
// that comes after a second or more of silence replaces most of them.
const estimateAge = time.Second

// The adaptive interval may grow at most by a factor of two per
// intervalDoubling, starting from intervalStart (within [Tmin, Tmax]);
// it may shrink at once. Without the limit one noisy estimate turned into
// seconds of staleness on the real broker: a per-record service time that
// spiked for a bucket (a GC pause, the broker taking both cores), or a
// process that restarted cold with a backlog, looked like an overload,
// and the overload interval made the next transactions large and slow,
// which kept the estimates, and the interval, up. A real overload still
// reaches its long interval, within seconds.
const (
	intervalDoubling = time.Second
	intervalStart    = 100 * time.Millisecond
)

// Controller decides the commit cadence of one commit group (one
// transactional session). Feed it observations in time order and call Tick;
// it is not safe for concurrent use. Times must not go backwards; a time
// earlier than one already seen is treated as that time.
type Controller struct {
	opts Options

	epoch  time.Time // first time seen; input times are summed relative to it
	now    time.Time
	primed bool

	arrivals  flow // λ
	processed flow // s = busy/processed
	backlog   int64
	// backlogMin is the least backlog seen since the last commit started,
	// prevBacklogMin the least over the cycle before: their minimum is the
	// persistent backlog, the part that a commit cycle did not clear.
	backlogMin, prevBacklogMin int64

	latency meanDev // commit latency L
	cost    meanDev // per-commit cost c
	hazard  hazard
	restore float64 // R, seconds

	// tenants[0] is the default slot for every tenant without options.
	tenants []tenant
	byName  map[string]int

	pending        int64 // outputs not yet in a commit, all tenants
	processedSince int64 // records processed since the last commit started
	closesPending  int   // window closes with uncommitted final results

	inFlight       bool
	inflight       []batch // per tenant, outputs in the outstanding commit
	inflightCloses int
	lastStart      time.Time
	lastFinish     time.Time // of the last acknowledged commit: ages L and c
	started        bool

	obsOldest meanDev
	obsMean   meanDev
	obsLast   float64

	watermark time.Time
	overSince time.Time // start of the current unstable overload; zero if none

	// Controller v2 (p99.go, broker.go, feedback.go): the commit rate
	// and the regression of latency on it, the feedback loop on observed
	// p99, and what the outstanding commit started with.
	commitRate flow
	rateReg    rateRegression
	// costFit and latFit regress commit cost and latency on the records
	// a commit carries (fit.go); startRecords is the outstanding
	// commit's.
	costFit, latFit sizeFit
	startRecords    float64
	// costSpan and latSpan regress them across the intervals planned
	// (fit_span.go); startInterval is the outstanding commit's, and
	// spanCost and spanLat the last slopes they could tell (0: none yet),
	// kept, as fitCost is, while the interval stays in one bin.
	costSpan, latSpan spanFit
	startInterval     float64
	spanCost, spanLat float64
	fb                feedback
	startRate         float64 // commit rate when the outstanding commit started
	startPred         float64 // P99 predicted when the outstanding commit started, s
	blocked           float64 // record-loop time the last acked commit took, s
	// fitCost is the last cost fit that could tell a slope. The model
	// keeps it while the sizes do not vary enough for a new one, as under
	// a steady interval: the mean cost it would fall back to includes
	// every per-record part, so spread over a longer interval it grows
	// with it, and the floor, c/headroom, with it. On the real broker at
	// 90% load that took the interval to 0.6–2.5 s, where commits cost
	// 100–180 ms each (fixed 100 ms kept up with the same input).
	fitCost lastFit
	// calmInterval is the last adaptive interval planned while the load
	// left commits room (holdInterval).
	calmInterval float64

	plan        plan
	slewT       float64   // the last planned adaptive interval, s
	slewAt      time.Time // when it was planned; zero before the first
	acks        uint64    // commits acknowledged
	replanDue   bool      // an estimate changed since the plan was made
	planBacklog int64     // backlog the plan was made with
	decided     Reason    // reason of the last commit decision, counted on start
	commits     [numReasons]uint64
	aborts      uint64
}

// plan is the result of evaluating the model at one Tick.
type plan struct {
	model     Model
	at        Model   // model at the chosen interval (AtInterval)
	staleness float64 // S(T)
	p99       float64 // P99(T)
	optimum   float64 // the relaxed J99 optimum before the feedback correction, s
	rho       float64 // ρ(T)
	interval  float64 // T, s
	floor     float64 // T_lo, s: the closest early commits may come
	// tenantFloor is the closest a listed tenant's staleness commit may
	// come under PolicyFixed (whose floor is its interval): the adaptive
	// floor, max(Tmin, c/headroom).
	tenantFloor float64
	overloaded  bool
	draining    bool // the persistent backlog takes longer than T to drain
}

// NewController fills opts' defaults, validates them and returns a Controller.
func NewController(opts Options) (*Controller, error) {
	if err := opts.EnsureDefaults().check(); err != nil {
		return nil, err
	}
	c := &Controller{
		opts:       opts,
		decided:    ReasonInterval,
		arrivals:   newFlow(opts.RateTimeConstant, opts.RateBucket),
		processed:  newFlow(opts.RateTimeConstant, opts.RateBucket),
		commitRate: newFlow(commitRateTau, commitRateBucket),
		hazard:     newHazard(opts.MeanTimeBetweenFailures),
		tenants:    []tenant{{target: opts.StalenessTarget}},
	}
	if len(opts.Tenants) > 0 {
		c.byName = make(map[string]int, len(opts.Tenants))
		// Slots in name order: sums over tenants are then always added in
		// the same order, so even float rounding is deterministic.
		for _, name := range slices.Sorted(maps.Keys(opts.Tenants)) {
			t := opts.Tenants[name]
			c.byName[name] = len(c.tenants)
			c.tenants = append(c.tenants, tenant{name: name, target: t.StalenessTarget, limited: t.Rate > 0,
				bucket: TokenBucket{rate: t.Rate, burst: t.Burst, tokens: t.Burst}})
		}
	}
	c.inflight = make([]batch, len(c.tenants))
	return c, nil
}

// Options returns the validated options.
func (c *Controller) Options() Options { return c.opts }

func (c *Controller) at(now time.Time) {
	if !c.primed {
		c.epoch, c.now, c.primed = now, now, true
		for i := range c.tenants {
			c.tenants[i].bucket.last = now
		}
		return
	}
	if now.After(c.now) {
		c.now = now
	}
}

func (c *Controller) slot(name string) int {
	if name == "" || c.byName == nil {
		return 0
	}
	if i, ok := c.byName[name]; ok {
		return i
	}
	return 0
}

// ObserveArrivals records n records appended to (or fetched from) the
// input partitions. They count towards λ and the backlog.
func (c *Controller) ObserveArrivals(now time.Time, n int) {
	c.at(now)
	if c.arrivals.add(c.now, n, 0) {
		c.replanDue = true
	}
	c.backlog += int64(n)
}

// ObserveProcessed records n records processed in busy time (the record
// loop's time spent on them).
func (c *Controller) ObserveProcessed(now time.Time, n int, busy time.Duration) {
	c.at(now)
	if c.processed.add(c.now, n, busy) {
		c.replanDue = true
	}
	c.processedSince += int64(n)
	c.backlog = max(0, c.backlog-int64(n))
	c.backlogMin = min(c.backlogMin, c.backlog)
}

// ObserveLag sets the backlog from a measured consumer lag, overriding the
// count derived from arrivals and processing.
func (c *Controller) ObserveLag(now time.Time, records int64) {
	c.at(now)
	c.backlog = max(0, records)
	c.backlogMin = min(c.backlogMin, c.backlog)
	c.replanDue = true
}

// ObserveOutput records n outputs produced for tenant ("" or an unknown
// tenant uses the default target) whose triggering input arrived at input.
// They become visible at the next commit. input is the staleness origin
// the controller measures, predicts and feeds back on: when the input
// reached the process (its poll, or its broker append time when known,
// which includes the consumer lag), never its event time, which producers
// set and which can be seconds off in either direction.
func (c *Controller) ObserveOutput(now time.Time, tenantName string, input time.Time, n int) {
	if n <= 0 {
		return
	}
	c.at(now)
	c.tenants[c.slot(tenantName)].pending.add(input, n, c.epoch)
	c.pending += int64(n)
}

// ObserveWatermark records a watermark advance to wm that closed closes
// windows; their final results must already have been reported with
// ObserveOutput. Closing windows is a barrier worth committing early for:
// downstream consumers wait on exactly those results.
func (c *Controller) ObserveWatermark(now time.Time, wm time.Time, closes int) {
	c.at(now)
	if closes > 0 {
		c.closesPending += closes
	}
	if wm.After(c.watermark) {
		c.watermark = wm
	}
}

// ObserveRestoreTime sets R, the expected restore time after a crash (the
// CheckpointScheduler's ExpectedRestore).
func (c *Controller) ObserveRestoreTime(d time.Duration) {
	c.restore = max(0, d.Seconds())
	c.replanDue = true
}

// ObserveFailure records that the process crashed or lost its state
// (reported on the restart that found it), updating the hazard rate.
func (c *Controller) ObserveFailure(now time.Time) {
	c.at(now)
	c.hazard.fail(c.now)
	c.replanDue = true
}

// ObserveCommitStarted records that a commit began at now; everything
// produced so far belongs to it. Call it when acting on Decision.Commit.
func (c *Controller) ObserveCommitStarted(now time.Time) {
	c.at(now)
	c.inFlight, c.started, c.lastStart = true, true, c.now
	c.prevBacklogMin, c.backlogMin = c.backlogMin, c.backlog
	c.commits[c.decided]++
	c.commitRate.add(c.now, 1, 0)
	c.startRate, c.startPred = c.commitRate.rate, c.plan.p99
	c.startRecords = float64(c.processedSince)
	c.startInterval = c.plan.interval
	c.decided = ReasonInterval
	for i := range c.tenants {
		c.inflight[i].merge(c.tenants[i].pending)
		c.tenants[i].pending = batch{}
	}
	c.pending, c.processedSince = 0, 0
	c.inflightCloses += c.closesPending
	c.closesPending = 0
}

// ObserveCommitFinished records that the outstanding commit succeeded at
// now: its outputs became visible. Its latency (now − start) updates L, its
// cost updates c, and the staleness of its outputs is observed.
func (c *Controller) ObserveCommitFinished(now time.Time, ack CommitAck) {
	c.at(now)
	if !c.inFlight {
		return
	}
	lat := c.now.Sub(c.lastStart).Seconds()
	var since float64
	if !c.lastFinish.IsZero() {
		since = c.now.Sub(c.lastFinish).Seconds()
	}
	c.lastFinish = c.now
	cost := ack.Cost.Seconds()
	if ack.Cost <= 0 {
		cost = lat
	}
	c.blocked = cost
	c.acks++
	if c.acks > 1 {
		// A session's first transaction registers every partition with
		// the coordinator and often carries a restore's or a restart's
		// backlog: on the real broker it took 0.5 s where the next took
		// 10 ms. As the first sample it would set L and c outright.
		c.latency.observeAged(lat, since, estimateAge.Seconds())
		c.cost.observeAged(cost, since, estimateAge.Seconds())
		c.rateReg.observe(c.startRate, lat)
		if c.startRecords > 0 {
			c.costFit.observe(c.startRecords, cost, since)
			c.latFit.observe(c.startRecords, lat, since)
			if a, b, resid, ok := c.costFit.fit(); ok {
				c.fitCost = lastFit{a: a, b: b, resid: resid, ok: true}
			}
			if c.startInterval > 0 {
				now := c.now.Sub(c.epoch).Seconds()
				c.costSpan.observe(c.startInterval, c.startRecords, cost, now)
				c.latSpan.observe(c.startInterval, c.startRecords, lat, now)
				// A slope the intervals do not bear out (0) hands the
				// model back to the size fit.
				if b, ok := c.costSpan.slope(now); ok {
					c.spanCost = b
				}
				if b, ok := c.latSpan.slope(now); ok {
					c.spanLat = b
				}
			}
		}
	}
	c.replanDue = true

	var all batch
	for i := range c.inflight {
		all.merge(c.inflight[i])
		c.inflight[i] = batch{}
	}
	if all.n > 0 {
		oldest := c.now.Sub(all.oldest).Seconds()
		mean := (float64(c.now.Sub(c.epoch)) - all.sumIn/float64(all.n)) / 1e9
		c.obsOldest.observe(oldest)
		c.obsMean.observe(mean)
		c.obsLast = oldest
		p := &c.plan
		canShrink := c.opts.Policy != PolicyFixed && !p.overloaded && !p.draining && p.interval > p.floor*(1+1e-6)
		c.fb.observe(all.n, oldest, mean, c.startPred, canShrink)
	}
	c.inFlight, c.inflightCloses = false, 0
}

// ObserveCommitAborted records that the outstanding commit failed or was
// aborted at now. Its outputs will be reprocessed and reproduced, so their
// input times return to pending: staleness keeps counting from them.
func (c *Controller) ObserveCommitAborted(now time.Time) {
	c.at(now)
	if !c.inFlight {
		return
	}
	for i := range c.inflight {
		c.pending += c.inflight[i].n
		c.tenants[i].pending.merge(c.inflight[i])
		c.inflight[i] = batch{}
	}
	c.closesPending += c.inflightCloses
	c.inFlight, c.inflightCloses = false, 0
	c.aborts++
}

// Admit asks whether tenant may have n more records processed now under
// its rate limit. When not, it returns how long to wait. Tenants without a
// rate are always admitted.
func (c *Controller) Admit(now time.Time, tenantName string, n int) (bool, time.Duration) {
	c.at(now)
	i := c.slot(tenantName)
	if i == 0 || !c.tenants[i].limited {
		return true, 0
	}
	return c.tenants[i].bucket.Take(c.now, float64(n))
}

// model fills the cost model from the estimators.
func (c *Controller) model() Model {
	l, lh := c.opts.CommitLatencyPrior.Seconds(), c.opts.CommitLatencyPrior.Seconds()
	if c.latency.n > 0 {
		l, lh = c.latency.mean, c.latency.high()
	}
	cost, costVar := l, 0.0
	if c.cost.n > 0 {
		cost, costVar = c.cost.mean, c.cost.vr
	}
	var perRecord, latPerRecord float64
	if a, r2, ok := c.spanThrough(&c.costFit, c.spanCost); ok {
		// The slope across intervals, through the recent commits.
		cost, costVar, perRecord = a, r2, c.spanCost
	} else if a, b, resid, ok := c.costFit.fit(); ok {
		cost, costVar, perRecord = a, resid*resid, b
	} else if f := c.fitCost; f.ok && f.b < c.processed.cost {
		// The last fit that could tell, unless it reads noise: a
		// per-record commit cost above the per-record processing time
		// came from commits of a handful of records (light load), and
		// taken past a step in load it read as an overload.
		cost, costVar, perRecord = c.costFit.anchor(f)
	}
	// mean + highDevs·(mean absolute deviation), as meanDev.high, with the
	// deviation of a normal residual (0.8σ).
	if a, r2, ok := c.spanThrough(&c.latFit, c.spanLat); ok {
		l, lh, latPerRecord = a, a+highDevs*0.8*math.Sqrt(r2), c.spanLat
	} else if a, b, resid, ok := c.latFit.fit(); ok {
		l, lh, latPerRecord = a, a+highDevs*0.8*resid, b
	}
	return Model{
		Lambda:           c.arrivals.rate,
		Service:          c.processed.cost,
		CommitCost:       cost,
		CommitCostVar:    costVar,
		CostPerRecord:    perRecord,
		Latency:          l,
		LatencyHigh:      lh,
		LatencyPerRecord: latPerRecord,
		Backlog:          float64(c.persistentBacklog()),
		Hazard:           c.hazard.rate(),
		Restore:          c.restore,
		CommitRate:       c.commitRate.rate,
		RateSlope:        c.rateReg.slope(),
		FetchFloor:       c.opts.FetchFloor.Seconds(),
	}
}

// spanThrough is the line of the across-interval slope b (spanFit)
// through f's recent commits, unless there is no such slope yet or it
// reads noise: a per-record commit part above the per-record processing
// time came from commits of a handful of records (see model).
func (c *Controller) spanThrough(f *sizeFit, b float64) (a, resid2 float64, ok bool) {
	if b <= 0 || b >= c.processed.cost {
		return 0, 0, false
	}
	return f.through(b)
}

func (c *Controller) replan() {
	m := c.model()
	tmin, tmax := c.opts.MinInterval.Seconds(), c.opts.MaxInterval.Seconds()
	p := plan{model: m}
	// The share of capacity commits may take: what the load leaves under
	// ρmax, at most MaxCommitShare, at least OverloadCommitShare.
	headroom := min(c.opts.MaxUtilization-m.Load(), c.opts.MaxCommitShare)
	saturated := headroom < c.opts.OverloadCommitShare
	// An overload is a queue the commit cycles do not clear, not an
	// estimate (backlogged says why).
	backlogged := c.backlogged(m)
	if saturated {
		headroom = c.opts.OverloadCommitShare
		p.overloaded = c.opts.Policy == PolicyFixed || backlogged
	}
	p.floor = min(tmax, max(tmin, m.CommitCost/headroom))
	if c.opts.Policy != PolicyFixed && !backlogged {
		// The queue clears at the current cadence, so a floor above it
		// rests on the estimates alone: it may rise only as fast as the
		// interval may grow (slew). With a backlog it applies at once.
		p.floor = max(tmin, min(p.floor, c.slewLimit(tmin, tmax)))
	}
	p.tenantFloor = p.floor
	switch c.opts.Policy {
	case PolicyFixed:
		p.interval = c.opts.FixedInterval.Seconds()
		p.floor = p.interval
		p.tenantFloor = min(p.tenantFloor, p.interval)
	default:
		if saturated && !p.overloaded {
			// The estimates say the load leaves commits no room, the
			// queue says the cycles keep up: hold the cadence planned
			// when the load last left room (holdInterval).
			c.overSince = time.Time{}
			p.interval = max(tmin, c.slew(c.holdInterval(p.floor), tmin, tmax))
			p.floor = min(p.floor, p.interval)
			p.tenantFloor = p.floor
		} else if p.overloaded && m.Load() >= 1-c.opts.OverloadCommitShare {
			// No interval makes the queue stable, so J is infinite
			// everywhere. Over an overload lasting H more, commits every
			// T add about H·c/T of backlog delay and the interval adds
			// T/2: the best T is sqrt(2·c·H). H is unknown; the time
			// overloaded so far is the estimate (an overload that has
			// lasted a minute is likely to last about another).
			if c.overSince.IsZero() {
				c.overSince = c.now
			}
			h := c.now.Sub(c.overSince).Seconds()
			p.interval = c.slew(min(tmax, max(p.floor, math.Sqrt(2*m.CommitCost*h))), tmin, tmax)
		} else {
			c.overSince = time.Time{}
			// Controller v2: minimise the p99 (p99.go), then take the
			// longest interval whose J99 is within P99Tolerance of the
			// optimum and whose P99 meets the tightest pending target,
			// then apply the feedback correction (feedback.go).
			t := m.Minimise99(p.floor, tmax)
			p.optimum = m.Relax(t, tmax, c.opts.P99Tolerance, c.target().Seconds())
			// The floor is not slewed: it keeps commits within the
			// capacity the load leaves.
			p.interval = max(p.floor, c.slew(p.optimum*c.fb.factor(), tmin, tmax))
			if !saturated {
				c.calmInterval = p.interval
			}
		}
	}
	if p.optimum == 0 {
		p.optimum = p.interval
	}
	p.p99 = m.P99(p.interval)
	p.at = m.AtInterval(p.interval)
	p.staleness, p.rho = m.Staleness(p.interval), m.Rho(p.interval)
	p.draining = m.Backlog > 0 && (p.rho >= 1 || m.Backlog*m.Service/(1-p.rho) > p.interval)
	c.plan = p
	c.replanDue, c.planBacklog = false, c.persistentBacklog()
}

// slew limits how fast the adaptive interval grows (intervalDoubling).
func (c *Controller) slew(t, tmin, tmax float64) float64 {
	t = min(t, c.slewLimit(tmin, tmax))
	c.slewT, c.slewAt = t, c.now
	return t
}

// slewLimit is the longest interval slew allows now.
func (c *Controller) slewLimit(tmin, tmax float64) float64 {
	if c.slewAt.IsZero() {
		return min(tmax, max(tmin, intervalStart.Seconds()))
	}
	return c.slewT * math.Exp2(c.now.Sub(c.slewAt).Seconds()/intervalDoubling.Seconds())
}

// persistentBacklog is the backlog the last two commit cycles did not
// clear.
func (c *Controller) persistentBacklog() int64 { return min(c.backlogMin, c.prevBacklogMin) }

// backlogged reports the evidence an overload needs: a persistent backlog
// larger than what arrives over one commit cycle (the interval planned
// last and a commit latency), which the cycles therefore did not clear.
//
// Why not the estimates alone: on the real broker at 90% of capacity the
// load λ·(s + per-record cost) read 1.1–1.3 with an empty queue (a burst
// of fetched records, a service-time bucket the broker's CPU inflated),
// and up to 23 in a bucket where few records were processed; the
// overload interval that followed grew to 0.6–2.5 s, where the commits,
// which carry everything the interval processed, took 100–180 ms each and
// the queue then did grow (fixed 100 ms kept up with the same input).
func (c *Controller) backlogged(m Model) bool {
	t := c.plan.interval
	if t == 0 {
		t = intervalStart.Seconds()
	}
	return m.Backlog > 0 && m.Backlog > m.Lambda*(t+m.Latency)
}

// holdInterval is the interval held while the estimates say saturated and
// the queue says otherwise: the last one planned while the load left
// room, or floor when there was none yet.
func (c *Controller) holdInterval(floor float64) float64 {
	if c.calmInterval > 0 {
		return c.calmInterval
	}
	return floor
}

// needsReplan reports whether the plan is out of date. Estimates move only
// when a rate bucket closes or a commit is acked, so between those a Tick
// reuses the plan unless the persistent backlog has moved by more than an eighth
// (and more than a handful of records) since it was made.
func (c *Controller) needsReplan() bool {
	if c.replanDue || c.plan.interval == 0 {
		return true
	}
	d := c.persistentBacklog() - c.planBacklog
	if d < 0 {
		d = -d
	}
	return d > 16 && d > c.planBacklog/8
}

// Tick re-decides at now: whether to commit, and the plan behind it.
func (c *Controller) Tick(now time.Time) Decision {
	c.at(now)
	now = c.now
	a, b := c.arrivals.advance(now), c.processed.advance(now)
	if c.commitRate.advance(now) {
		// The commit rate feeds only the regression's marginal term:
		// replan only when the slope is in use.
		b = b || c.rateReg.slope() > 0
	}
	if a || b {
		c.replanDue = true
	}
	c.hazard.advance(now)
	if c.needsReplan() {
		c.replan()
	}
	p := &c.plan

	d := Decision{
		Interval:           duration(p.interval),
		PredictedStaleness: duration(p.staleness),
		Utilization:        p.rho,
		Overloaded:         p.overloaded,
		Draining:           p.draining,
		Trace:              c.trace(),
	}
	last := c.lastStart
	if !c.started {
		last = c.epoch
	}
	due := last.Add(d.Interval)
	d.Wake = due
	if c.inFlight {
		d.Reason = ReasonInFlight
		d.Wake = now.Add(duration(p.at.Latency))
		return d
	}
	if c.pending == 0 && c.processedSince == 0 {
		d.Reason = ReasonIdle
		d.Wake = now.Add(d.Interval)
		return d
	}
	commit := func(r Reason) Decision {
		d.Commit, d.Reason, d.Wake = true, r, now
		c.decided = r
		return d
	}
	if c.opts.Policy != PolicyFixed && c.closesPending > 0 && c.pending > 0 {
		// Window finals are what downstream consumers wait on: commit
		// them at once, whatever the interval, floor or load (a window
		// closes at most once per window size per task, so the extra
		// commits are few). Under a commit in flight this decision waits
		// for its ack; the tick after the ack commits. MinInterval stays
		// a hard bound (it is below a commit's latency by default, so a
		// final chained on an in-flight commit never waits for it).
		tmin := last.Add(c.opts.MinInterval)
		if !c.started || !now.Before(tmin) {
			return commit(ReasonWindowFinal)
		}
		d.Reason, d.Wake = ReasonWait, tmin
		return d
	}
	if !now.Before(due) {
		return commit(ReasonInterval)
	}
	d.Reason = ReasonWait
	if p.overloaded || p.draining {
		// Early commits would take capacity the backlog needs: the
		// outputs they would hurry are late anyway, and every record
		// behind them would be later still.
		return d
	}
	if c.opts.Policy == PolicyFixed {
		// The fixed cadence holds for every output but those of tenants
		// listed in Options.Tenants with a tighter target: their
		// pending outputs commit when the target (less the expected
		// commit latency) is reached, at most as often as the adaptive
		// floor allows. That is how one application serves a
		// latency-sensitive tenant class without giving every tenant
		// the commit rate (and broker load) it needs.
		if dl, ok := c.stalenessDeadline(duration(p.at.Latency), 1, c.opts.FixedInterval); ok {
			at := later(dl, last.Add(duration(p.tenantFloor)))
			if !now.Before(at) {
				return commit(ReasonStaleness)
			}
			d.Wake = earliest(d.Wake, at)
		}
		return d
	}
	floorAt := last.Add(duration(p.floor))
	if dl, ok := c.stalenessDeadline(duration(p.at.Latency), 0, math.MaxInt64); ok {
		at := later(dl, floorAt)
		if !now.Before(at) {
			return commit(ReasonStaleness)
		}
		d.Wake = earliest(d.Wake, at)
	}
	return d
}

// stalenessDeadline is the earliest time at which some tenant's oldest
// pending output, plus the expected commit latency lat, reaches that
// tenant's target. Only tenants with a target below below count, and
// tenant slots below first do not (1: only the tenants listed in
// Options.Tenants, not the default slot).
func (c *Controller) stalenessDeadline(lat time.Duration, first int, below time.Duration) (time.Time, bool) {
	var dl time.Time
	ok := false
	for i := first; i < len(c.tenants); i++ {
		t := &c.tenants[i]
		if t.pending.n == 0 || t.target >= below {
			continue
		}
		at := t.pending.oldest.Add(t.target - lat)
		if !ok || at.Before(dl) {
			dl, ok = at, true
		}
	}
	return dl, ok
}

// target is the tightest target among tenants with uncommitted output, or
// the default target when there is none.
func (c *Controller) target() time.Duration {
	tgt := time.Duration(math.MaxInt64)
	for i := range c.tenants {
		if c.tenants[i].pending.n > 0 || c.inflight[i].n > 0 {
			tgt = min(tgt, c.tenants[i].target)
		}
	}
	if tgt == time.Duration(math.MaxInt64) {
		return c.opts.StalenessTarget
	}
	return tgt
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Snapshot returns the observable state as of the last Tick.
func (c *Controller) Snapshot() Snapshot {
	p := c.plan
	m := p.model
	tgt := c.target()
	maxS := m.MaxStaleness(p.interval)
	s := Snapshot{
		Policy:                c.opts.Policy,
		Interval:              duration(p.interval),
		MinSpacing:            duration(p.floor),
		PredictedStaleness:    duration(m.Staleness(p.interval)),
		PredictedMaxStaleness: duration(maxS),
		PredictedP99:          duration(p.p99),
		ObservedP99:           duration(c.fb.observed),
		Correction:            c.fb.integral,
		CommitRate:            m.CommitRate,
		LatencySlope:          m.RateSlope,
		Blocked:               duration(c.blocked),
		ObservedStaleness:     duration(c.obsOldest.mean),
		ObservedStalenessDev:  duration(c.obsOldest.dev),
		ObservedMeanStaleness: duration(c.obsMean.mean),
		LastObservedStaleness: duration(c.obsLast),
		Target:                tgt,
		TargetFeasible:        maxS <= tgt.Seconds(),
		Utilization:           m.Rho(p.interval),
		Load:                  m.Load(),
		Exposure:              m.Exposure(p.interval),
		Overloaded:            p.overloaded,
		Draining:              p.draining,
		ArrivalRate:           m.Lambda,
		ServiceTime:           duration(m.Service),
		CommitCost:            duration(m.CommitCost),
		CostPerRecord:         duration(m.CostPerRecord),
		LatencyPerRecord:      duration(m.LatencyPerRecord),
		CommitLatency:         duration(p.at.Latency),
		CommitLatencyHigh:     duration(p.at.LatencyHigh),
		HazardRate:            m.Hazard,
		Backlog:               c.backlog,
		Pending:               c.pending,
		Watermark:             c.watermark,
		InFlight:              c.inFlight,
		Aborts:                c.aborts,
		CommitsBy:             make(map[Reason]uint64),
	}
	if c.latency.n > 0 {
		s.CommitLatencyDev = duration(c.latency.dev)
	}
	for r, n := range c.commits {
		if n > 0 {
			s.CommitsBy[Reason(r)] = n
			s.Commits += n
		}
	}
	return s
}
