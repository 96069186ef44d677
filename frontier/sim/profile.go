package sim

import (
	"math"
	"time"
)

// Profile is a load and a system to run it on.
type Profile struct {
	Name     string
	Duration time.Duration
	Seed     uint64
	// Rate is the mean arrival rate (records/s) at offset t from the start.
	Rate func(t time.Duration) float64

	// Service is the per-record processing cost. Default 100µs (a
	// capacity of 10k records/s).
	Service time.Duration
	// Commit models commit latency and cost.
	Commit CommitModel
	// Window is the tumbling event-time window size; 0 means 1s, negative
	// means no windows.
	Window time.Duration
	// Step is the simulation time step. Default 1ms.
	Step time.Duration
	// TickPeriod is the longest the runtime goes without ticking the
	// controller. Default 5ms.
	TickPeriod time.Duration

	// Skew is the largest event-time skew: each step's arrivals carry an
	// event time up to Skew (uniformly drawn) before their arrival. The
	// watermark is the highest event time processed less Grace, so skew
	// moves when windows close; staleness is still measured from arrival,
	// as the controller measures it.
	Skew, Grace time.Duration
	// Failures are crash offsets: at each, the outputs not yet visible
	// are lost and their records reprocessed, the record loop is down for
	// Restore (default 1s) and the controller restarts fresh (a new
	// process) and is told of the failure.
	Failures []time.Duration
	Restore  time.Duration
	// PhaseLength, when positive, also reports results per consecutive
	// phase of that length (Result.Phases), by the arrival time of each
	// output's input, the start of each commit and the close of each
	// window.
	PhaseLength time.Duration
	// FetchFloor is the read_committed fetch floor added to the commit
	// latency in the close→visible criterion (Result.FinalsWithin).
	FetchFloor time.Duration
}

// CommitModel draws commit latencies: Base·exp(Jitter·N(0,1)) (a lognormal
// with median Base), times TailFactor with probability TailProb (a slow
// broker, a log roll). Blocking is the fraction of the latency during
// which the record loop cannot process.
type CommitModel struct {
	Base       time.Duration // default 10ms, a local broker's p50
	Jitter     float64       // default 0.25
	TailProb   float64       // default 0.01
	TailFactor float64       // default 5
	Blocking   float64       // default 1
	// RateSlope is the latency each commit per second (counted over the
	// last second) adds: a broker sharing the machine slows down as the
	// commit rate rises. Default 0.
	RateSlope time.Duration
}

func (p Profile) withDefaults() Profile {
	if p.Service == 0 {
		p.Service = 100 * time.Microsecond
	}
	if p.Window == 0 {
		p.Window = time.Second
	}
	if p.Step == 0 {
		p.Step = time.Millisecond
	}
	if p.TickPeriod == 0 {
		p.TickPeriod = 5 * time.Millisecond
	}
	if p.Restore == 0 {
		p.Restore = time.Second
	}
	if p.Rate == nil {
		p.Rate = func(time.Duration) float64 { return 0 }
	}
	c := &p.Commit
	if c.Base == 0 {
		c.Base = 10 * time.Millisecond
	}
	if c.Jitter == 0 {
		c.Jitter = 0.25
	}
	if c.TailProb == 0 {
		c.TailProb = 0.01
	}
	if c.TailFactor == 0 {
		c.TailFactor = 5
	}
	if c.Blocking == 0 {
		c.Blocking = 1
	}
	return p
}

// Capacity is the record loop's capacity without commits, records/s.
func (p Profile) Capacity() float64 { return 1 / p.withDefaults().Service.Seconds() }

// Steady is a constant load at fraction load of capacity.
func Steady(name string, load float64, d time.Duration) Profile {
	p := Profile{Name: name, Duration: d, Seed: 1}
	r := load * p.Capacity()
	p.Rate = func(time.Duration) float64 { return r }
	return p
}

// Ramp rises linearly from fraction from to fraction to of capacity.
func Ramp(name string, from, to float64, d time.Duration) Profile {
	p := Profile{Name: name, Duration: d, Seed: 2}
	c := p.Capacity()
	p.Rate = func(t time.Duration) float64 {
		f := t.Seconds() / d.Seconds()
		return c * (from + (to-from)*f)
	}
	return p
}

// Burst runs at fraction base of capacity with bursts at fraction peak for
// burst out of every period.
func Burst(name string, base, peak float64, burst, period, d time.Duration) Profile {
	p := Profile{Name: name, Duration: d, Seed: 3}
	c := p.Capacity()
	p.Rate = func(t time.Duration) float64 {
		if t%period < burst {
			return c * peak
		}
		return c * base
	}
	return p
}

// Sine oscillates between fractions lo and hi of capacity over period: a
// diurnal pattern compressed.
func Sine(name string, lo, hi float64, period, d time.Duration) Profile {
	p := Profile{Name: name, Duration: d, Seed: 4}
	c := p.Capacity()
	p.Rate = func(t time.Duration) float64 {
		x := 0.5 - 0.5*math.Cos(2*math.Pi*t.Seconds()/period.Seconds())
		return c * (lo + (hi-lo)*x)
	}
	return p
}

// Profiles returns the default comparison: steady (30% load), ramp (5% to
// 95%), burst (30% with 5s bursts at 120% every minute) and overload (110%
// throughout), each lasting d.
func Profiles(d time.Duration) []Profile {
	p := []Profile{
		Steady("steady", 0.3, d),
		Ramp("ramp", 0.05, 0.95, d),
		Burst("burst", 0.3, 1.2, 5*time.Second, time.Minute, d),
		Steady("overload", 1.1, d),
	}
	p[3].Seed = 5
	return p
}

// Phased runs the loads (fractions of capacity) one after another, each
// for phase, and reports per phase.
func Phased(name string, loads []float64, phase time.Duration) Profile {
	p := Profile{Name: name, Duration: time.Duration(len(loads)) * phase, Seed: 6, PhaseLength: phase}
	c := p.Capacity()
	ls := append([]float64(nil), loads...)
	p.Rate = func(t time.Duration) float64 {
		return c * ls[min(len(ls)-1, int(t/phase))]
	}
	return p
}

// Lookup returns the default profile named name, lasting d.
func Lookup(name string, d time.Duration) (Profile, bool) {
	for _, p := range Profiles(d) {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}
