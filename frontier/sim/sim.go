package sim

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tidemark-streams/tidemark/frontier"
)

// epoch is the simulated wall clock's origin. Any fixed time would do.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cohort is n records (or outputs) whose input arrived at step at.
type cohort struct {
	at     int64 // arrival, in steps since the start
	n      int64
	window bool  // a window's final result
	event  int64 // event time, in steps (arrival less skew)
	closed int64 // for a final: the step its window closed
}

// fifo is a queue of cohorts with amortised O(1) pops.
type fifo struct {
	q    []cohort
	head int
}

func (f *fifo) push(c cohort) {
	if n := len(f.q); n > f.head && f.q[n-1].at == c.at && f.q[n-1].window == c.window &&
		f.q[n-1].event == c.event && f.q[n-1].closed == c.closed {
		f.q[n-1].n += c.n
		return
	}
	f.q = append(f.q, c)
}

func (f *fifo) len() int { return len(f.q) - f.head }

func (f *fifo) front() *cohort { return &f.q[f.head] }

func (f *fifo) pop() {
	f.head++
	if f.head > 1024 && f.head*2 > len(f.q) {
		n := copy(f.q, f.q[f.head:])
		f.q, f.head = f.q[:n], 0
	}
}

func (f *fifo) reset() { f.q, f.head = f.q[:0], 0 }

// histogram bounds, microseconds.
const histMax = int64(24 * time.Hour / time.Microsecond)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, 3) }

func record(h *hdrhistogram.Histogram, d time.Duration, n int64) {
	v := max(1, min(histMax, int64(d/time.Microsecond)))
	_ = h.RecordValues(v, n) // v is clamped into range, so this cannot fail
}

// Run simulates profile under each policy and reports the results in the
// order given. It is deterministic in the profile (including its Seed):
// policies run concurrently, but each on its own random streams, and Run
// returns only when all are done. A policy whose options do not validate
// reports the error in its Result. Profile.Rate must be safe to call
// concurrently (the constructors' are pure functions).
func Run(profile Profile, policies ...Policy) Report {
	p := profile.withDefaults()
	rep := Report{Profile: p.Name, Duration: p.Duration, Capacity: p.Capacity()}
	rep.Results = make([]Result, len(policies))
	var wg sync.WaitGroup
	for i, pol := range policies {
		wg.Go(func() { rep.Results[i] = runOne(p, pol) })
	}
	wg.Wait()
	return rep
}

func runOne(p Profile, pol Policy) Result {
	res := Result{Policy: pol.Name}
	ctl, err := frontier.NewController(pol.Options)
	if err != nil {
		res.Err = err
		return res
	}
	arr := arrivalSource{r: rand.New(rand.NewPCG(p.Seed, 0x61727269))}
	comRng := rand.New(rand.NewPCG(p.Seed, 0x636f6d6d))  // commit latencies
	skewRng := rand.New(rand.NewPCG(p.Seed, 0x736b6577)) // event-time skew

	step := p.Step
	steps := int64(p.Duration / step)
	stepSec := step.Seconds()
	svc := p.Service.Seconds()
	at := func(i int64) time.Time { return epoch.Add(time.Duration(i) * step) }
	windowSteps := int64(-1)
	if p.Window > 0 {
		windowSteps = int64(p.Window / step)
	}
	phaseSteps := int64(p.PhaseLength / step)
	phases := make([]phaseAcc, 0)
	if phaseSteps > 0 {
		phases = make([]phaseAcc, (steps+phaseSteps-1)/phaseSteps)
		for k := range phases {
			phases[k] = newPhaseAcc()
		}
	}
	phase := func(i int64) *phaseAcc {
		if phaseSteps <= 0 {
			return nil
		}
		return &phases[min(int64(len(phases)-1), i/phaseSteps)]
	}
	failures := make([]int64, 0, len(p.Failures))
	for _, f := range p.Failures {
		failures = append(failures, int64(f/step))
	}
	skewSteps := int64(p.Skew / step)
	graceSteps := int64(p.Grace / step)

	var (
		queue, pending, inflight fifo
		all, windows, closeVis   = newHist(), newHist(), newHist()
		latencies                = newHist()
		budget                   float64 // processing seconds carried between steps
		blockedUntil             int64   // step at which the loop unblocks
		doneAt                   int64   = -1
		commitStart              int64
		nextTick                 int64
		wmWindow                 int64 // index of the window the watermark is in
		maxEvent                 int64 = math.MinInt64
		predSum                  float64
		predN, predInf           int64 // outputs committed with a finite / infinite prediction
		pendingN                 int64 // outputs since the last commit started
		ticks, overTicks         int64
		recentStarts             []int64 // commit starts in the last second, for RateSlope
		finals, finalsWithin     int64
		reemit                   []cohort // finals lost in a crash, re-emitted after the restore
	)

	for i := int64(0); i < steps; i++ {
		now := at(i)
		event := false

		// Arrivals. A cohort's event time is its arrival less a skew.
		if n := arr.draw(p.Rate(time.Duration(i)*step) * stepSec); n > 0 {
			ev := i
			if skewSteps > 0 {
				ev -= skewRng.Int64N(skewSteps + 1)
			}
			queue.push(cohort{at: i, n: n, event: ev})
			res.Arrived += n
			if ph := phase(i); ph != nil {
				ph.arrived += n
			}
			ctl.ObserveArrivals(now, int(n))
		}

		// A crash: what is not visible is lost and redone after a restore,
		// by a fresh controller.
		if len(failures) > 0 && i >= failures[0] {
			failures = failures[1:]
			res.Failures++
			var redo fifo
			var finalsBack []cohort
			for _, f := range []*fifo{&inflight, &pending} {
				for ; f.len() > 0; f.pop() {
					c := *f.front()
					if c.window {
						// Reprocessing re-emits the final: it is pending
						// again once the loop is back.
						finalsBack = append(finalsBack, c)
						continue
					}
					redo.push(cohort{at: c.at, n: c.n, event: c.event})
					res.Processed -= c.n // processed again after the restore
				}
				f.reset()
			}
			for ; queue.len() > 0; queue.pop() {
				redo.push(*queue.front())
			}
			queue = redo
			doneAt, pendingN, budget = -1, 0, 0
			blockedUntil = i + int64(p.Restore/step)
			ctl, _ = frontier.NewController(pol.Options) // validated above
			ctl.ObserveFailure(now)
			reemit = append(reemit, finalsBack...)
			event = true
		}
		if len(reemit) > 0 && i >= blockedUntil {
			// The restarted loop reprocesses to the watermark again and
			// re-emits the finals the crash lost.
			for _, c := range reemit {
				pending.push(c)
				pendingN += c.n
				ctl.ObserveOutput(now, "", at(c.at), int(c.n))
				ctl.ObserveWatermark(now, at(maxEvent-graceSteps), int(c.n))
			}
			reemit = reemit[:0]
			event = true
		}

		// Commit completion: its outputs become visible.
		if doneAt >= 0 && i >= doneAt {
			lat := time.Duration(doneAt-commitStart) * step
			record(latencies, lat, 1)
			for ; inflight.len() > 0; inflight.pop() {
				c := inflight.front()
				age := time.Duration(i-c.at) * step
				record(all, age, c.n)
				ph := phase(c.at)
				if c.window {
					record(windows, age, c.n)
					cv := time.Duration(i-c.closed) * step
					record(closeVis, cv, c.n)
					finals += c.n
					// Visible within the latency of the commit that carried
					// it plus the fetch floor of closing (allowing the
					// step's rounding): it did not wait for a commit in
					// flight or for an interval.
					within := cv <= lat+p.FetchFloor+step
					if within {
						finalsWithin += c.n
					}
					if ph := phase(c.closed); ph != nil {
						record(ph.closeVis, cv, c.n)
						ph.finals += c.n
						if within {
							ph.finalsWithin += c.n
						}
					}
				} else {
					res.Good += c.n
					if ph != nil {
						record(ph.all, age, c.n)
						ph.good += c.n
					}
				}
			}
			inflight.reset()
			blocked := time.Duration(float64(doneAt-commitStart) * p.Commit.Blocking * float64(step))
			ctl.ObserveCommitFinished(now, frontier.CommitAck{Cost: max(blocked, time.Nanosecond)})
			doneAt = -1
			event = true
		}

		// Processing.
		if i >= blockedUntil {
			budget += stepSec
		}
		var done int64
		for budget >= svc && queue.len() > 0 {
			c := queue.front()
			k := min(c.n, int64(budget/svc))
			budget -= float64(k) * svc
			c.n -= k
			done += k
			pending.push(cohort{at: c.at, n: k, event: c.event})
			pendingN += k
			ctl.ObserveOutput(now, "", at(c.at), int(k))
			maxEvent = max(maxEvent, c.event)
			if wm := maxEvent - graceSteps; windowSteps > 0 && wm/windowSteps > wmWindow {
				// The watermark passes the end of its window, closing it
				// (and any empty ones after it: one result per closed
				// window), released by this record: its arrival is the
				// final's staleness origin.
				closes := wm/windowSteps - wmWindow
				wmWindow = wm / windowSteps
				pending.push(cohort{at: c.at, n: closes, window: true, closed: i})
				pendingN += closes
				res.Windows += closes
				ctl.ObserveOutput(now, "", at(c.at), int(closes))
				ctl.ObserveWatermark(now, at(wm), int(closes))
				event = true
			}
			if c.n == 0 {
				queue.pop()
			}
		}
		if queue.len() == 0 {
			budget = 0 // an idle loop cannot bank time
		}
		if done > 0 {
			res.Processed += done
			ctl.ObserveProcessed(now, int(done), time.Duration(float64(done)*svc*1e9))
		}

		// Decide.
		if event || i >= nextTick {
			d := ctl.Tick(now)
			nextTick = i + int64(p.TickPeriod/step)
			if w := int64(d.Wake.Sub(epoch) / step); w > i && w < nextTick {
				nextTick = w
			} else if w <= i {
				nextTick = i + 1
			}
			ticks++
			if d.Overloaded {
				overTicks++
			}
			if d.Commit && doneAt < 0 {
				second := int64(time.Second / step)
				for len(recentStarts) > 0 && recentStarts[0] <= i-second {
					recentStarts = recentStarts[1:]
				}
				recentStarts = append(recentStarts, i)
				lat := commitLatency(comRng, p.Commit) + time.Duration(len(recentStarts))*p.Commit.RateSlope
				ls := max(1, int64(math.Ceil(float64(lat)/float64(step))))
				commitStart, doneAt = i, i+ls
				blockedUntil = max(blockedUntil, i+int64(math.Ceil(float64(ls)*p.Commit.Blocking)))
				inflight, pending = pending, inflight
				pending.reset()
				ctl.ObserveCommitStarted(now)
				res.Commits++
				if ph := phase(i); ph != nil {
					ph.commits++
				}
				// Weight each prediction by the outputs the commit carries,
				// as the observed staleness is weighted.
				if s := d.PredictedStaleness; s < time.Hour {
					predSum += s.Seconds() * float64(pendingN)
					predN += pendingN
				} else {
					predInf += pendingN
				}
				pendingN = 0
			}
		}
	}

	for _, f := range []*fifo{&pending, &inflight} {
		for k := f.head; k < len(f.q); k++ {
			if !f.q[k].window {
				res.Uncommitted += f.q[k].n
			}
		}
	}
	sec := p.Duration.Seconds()
	res.Throughput = float64(res.Processed) / sec
	res.Goodput = float64(res.Good) / sec
	res.CommitsPerSec = float64(res.Commits) / sec
	res.Backlog = res.Arrived - res.Processed
	res.Visible = all.TotalCount()
	res.P50 = q(all, 50)
	res.P99 = q(all, 99)
	res.P999 = q(all, 99.9)
	res.Max = time.Duration(all.Max()) * time.Microsecond
	res.Mean = time.Duration(all.Mean() * float64(time.Microsecond))
	res.WindowP99 = q(windows, 99)
	res.CloseVisibleP99 = q(closeVis, 99)
	res.CommitLatencyP50 = q(latencies, 50)
	if finals > 0 {
		res.FinalsWithin = float64(finalsWithin) / float64(finals)
	}
	res.PredictedUnstable = float64(predInf) / float64(max(1, predN+predInf))
	if predN > 0 {
		res.PredictedMean = time.Duration(predSum / float64(predN) * 1e9)
	}
	res.OverloadedFraction = float64(overTicks) / float64(max(1, ticks))
	res.Final = ctl.Snapshot()
	for k := range phases {
		res.Phases = append(res.Phases, phases[k].result(p, k))
	}
	return res
}

func q(h *hdrhistogram.Histogram, pct float64) time.Duration {
	return time.Duration(h.ValueAtQuantile(pct)) * time.Microsecond
}

func commitLatency(r *rand.Rand, m CommitModel) time.Duration {
	l := float64(m.Base) * math.Exp(m.Jitter*r.NormFloat64())
	if r.Float64() < m.TailProb {
		l *= m.TailFactor
	}
	return time.Duration(l)
}

// poisson draws a Poisson count with the given mean: Knuth's product
// method for small means, a rounded normal approximation above 30 (where
// its error is far below the arrival noise it models).
// expNegMean is exp(−mean), passed in so callers can cache it.
func poisson(r *rand.Rand, mean, expNegMean float64) int64 {
	switch {
	case mean <= 0:
		return 0
	case mean > 30:
		return max(0, int64(math.Round(mean+math.Sqrt(mean)*r.NormFloat64())))
	}
	l, k, prod := expNegMean, int64(0), r.Float64()
	for prod > l {
		k++
		prod *= r.Float64()
	}
	return k
}

// arrivalSource draws Poisson arrival counts. It remembers exp(−mean) for
// the last mean: most profiles hold the rate constant for long stretches.
type arrivalSource struct {
	r          *rand.Rand
	mean, expn float64
}

func (a *arrivalSource) draw(mean float64) int64 {
	if mean > 0 && mean <= 30 && mean != a.mean {
		a.mean, a.expn = mean, math.Exp(-mean)
	}
	return poisson(a.r, mean, a.expn)
}
