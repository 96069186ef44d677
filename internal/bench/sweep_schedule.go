package bench

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The sweep's input schedule (issue #12, Deliver item 4): a warm-up at the
// first phase's load, then one phase per load level, each a fraction of the
// calibrated capacity. Every policy gets the same schedule, the same key
// sequence and the same event-time skew (same seed), so the phases differ
// between policies only by what the policies do with them.

// DefaultSweepLoads are the load levels: 10→50→90→50→10% of the
// calibrated capacity. Going up and coming back down shows whether a policy
// recovers (a backlog left by the 90% phase and the crash in it).
var DefaultSweepLoads = []float64{0.1, 0.5, 0.9, 0.5, 0.1}

// sweepSchedule is one run's timeline, as offsets from the drive's start.
type sweepSchedule struct {
	capacity float64 // records/s that a load of 1.0 is
	loads    []float64
	warmup   time.Duration // at loads[0], not measured
	phase    time.Duration // each phase's length
	// killAt is when the worker is SIGKILLed: killFrac into phase
	// killPhase (0-based).
	killPhase int
	killFrac  float64
}

// phaseStart is phase k's start offset; k == len(loads) is the end.
func (s sweepSchedule) phaseStart(k int) time.Duration {
	return s.warmup + time.Duration(k)*s.phase
}

func (s sweepSchedule) end() time.Duration { return s.phaseStart(len(s.loads)) }

// killAt is the SIGKILL's offset.
func (s sweepSchedule) killAt() time.Duration {
	return s.phaseStart(s.killPhase) + time.Duration(s.killFrac*float64(s.phase))
}

// phaseOf is the phase an offset falls in: -1 in the warm-up, len(loads)
// after the end.
func (s sweepSchedule) phaseOf(d time.Duration) int {
	if d < s.warmup {
		return -1
	}
	k := int((d - s.warmup) / s.phase)
	return min(k, len(s.loads))
}

// rate is the target input rate at offset d, records/s (0 after the end).
func (s sweepSchedule) rate(d time.Duration) float64 {
	k := s.phaseOf(d)
	switch {
	case k < 0:
		return s.loads[0] * s.capacity
	case k >= len(s.loads):
		return 0
	}
	return s.loads[k] * s.capacity
}

// due is how many records the driver should have sent by offset d: the
// integral of rate from 0 to d, so a driver that falls behind (a blocked
// producer) catches up instead of losing input.
func (s sweepSchedule) due(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	sec := func(x time.Duration) float64 { return x.Seconds() }
	total := s.loads[0] * s.capacity * sec(min(d, s.warmup))
	for k, l := range s.loads {
		from, to := s.phaseStart(k), s.phaseStart(k+1)
		if d <= from {
			break
		}
		total += l * s.capacity * sec(min(d, to)-from)
	}
	return int64(total)
}

func (s sweepSchedule) validate() error {
	if len(s.loads) == 0 {
		return fmt.Errorf("bench sweep: no load levels")
	}
	for _, l := range s.loads {
		if l <= 0 || l > 1.5 {
			return fmt.Errorf("bench sweep: load %v out of range (0, 1.5]", l)
		}
	}
	if s.phase <= 0 || s.warmup < 0 || s.capacity <= 0 {
		return fmt.Errorf("bench sweep: phase %s, warm-up %s, capacity %.0f: want phase > 0, warm-up ≥ 0, capacity > 0", s.phase, s.warmup, s.capacity)
	}
	if s.killPhase < 0 || s.killPhase >= len(s.loads) || s.killFrac < 0 || s.killFrac >= 1 {
		return fmt.Errorf("bench sweep: kill at %.2f into phase %d of %d: out of range", s.killFrac, s.killPhase+1, len(s.loads))
	}
	return nil
}

// skewer stamps inputs with event times up to max before their produce
// time, uniformly: out-of-order input whose lateness the windowed
// workload's grace (5 s for a 5 s skew) just covers. Seeded, so every
// policy sees the same skew sequence.
type skewer struct {
	r   *rand.Rand
	max time.Duration
}

func newSkewer(seed uint64, max time.Duration) *skewer {
	return &skewer{r: rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909)), max: max}
}

// stamp is the event time of an input produced at t, in whole
// milliseconds (Kafka's timestamp resolution).
func (s *skewer) stamp(t time.Time) time.Time {
	var back time.Duration
	if s.max > 0 {
		back = time.Duration(s.r.Int64N(int64(s.max) + 1))
	}
	return t.Add(-back).Truncate(time.Millisecond)
}

// newZipfKeyspace is keyspace with Zipf exponent s (the sweep's 1.2; the
// other measurements keep newKeyspace's 1.1).
func newZipfKeyspace(seed uint64, n int, s float64) *keyspace {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ks := &keyspace{zipf: rand.NewZipf(r, s, 1, uint64(n-1)), keys: make([][]byte, n)}
	for i := range ks.keys {
		ks.keys[i] = fmt.Appendf(nil, "sku-%06d", i)
	}
	return ks
}
