package gen

import (
	"fmt"
	"time"
)

// ProfileKind selects the shape of the rate schedule.
type ProfileKind string

const (
	// Steady holds Rate.
	Steady ProfileKind = "steady"
	// Ramp rises linearly from RampFrom to Rate over RampOver, then holds.
	Ramp ProfileKind = "ramp"
	// Burst holds Rate, except for BurstFor out of every BurstEvery, when it
	// runs at Rate*BurstFactor — the flash sale that stretches commit
	// cadence.
	Burst ProfileKind = "burst"
)

// MaxRate is the highest rate a profile may ask for, events per second.
const MaxRate = 10_000_000

// Profile is a rate schedule in events per second over all topics.
type Profile struct {
	Kind ProfileKind // default Steady
	Rate float64     // default 1000

	RampFrom float64       // default Rate/10
	RampOver time.Duration // default 1m

	BurstFactor float64       // default 5
	BurstEvery  time.Duration // default 30s
	BurstFor    time.Duration // default 5s
}

func (p Profile) withDefaults() Profile {
	if p.Kind == "" {
		p.Kind = Steady
	}
	if p.Rate == 0 {
		p.Rate = 1000
	}
	if p.RampFrom == 0 {
		p.RampFrom = p.Rate / 10
	}
	if p.RampOver == 0 {
		p.RampOver = time.Minute
	}
	if p.BurstFactor == 0 {
		p.BurstFactor = 5
	}
	if p.BurstEvery == 0 {
		p.BurstEvery = 30 * time.Second
	}
	if p.BurstFor == 0 {
		p.BurstFor = 5 * time.Second
	}
	return p
}

// Validate checks the profile after defaults apply.
func (p Profile) Validate() error {
	p = p.withDefaults()
	rateIn := func(name string, v float64) error {
		if !(v > 0 && v <= MaxRate) {
			return fmt.Errorf("gen: Profile.%s is %v events/s, accepted range (0, %d]", name, v, MaxRate)
		}
		return nil
	}
	if err := rateIn("Rate", p.Rate); err != nil {
		return err
	}
	switch p.Kind {
	case Steady:
	case Ramp:
		if err := rateIn("RampFrom", p.RampFrom); err != nil {
			return err
		}
		if p.RampOver <= 0 {
			return fmt.Errorf("gen: Profile.RampOver is %v, must be positive", p.RampOver)
		}
	case Burst:
		if !(p.BurstFactor >= 1) || p.Rate*p.BurstFactor > MaxRate {
			return fmt.Errorf("gen: Profile.BurstFactor is %v, accepted range [1, %v] at rate %v", p.BurstFactor, MaxRate/p.Rate, p.Rate)
		}
		if p.BurstEvery <= 0 || p.BurstFor <= 0 || p.BurstFor > p.BurstEvery {
			return fmt.Errorf("gen: Profile.BurstFor %v and BurstEvery %v: need 0 < BurstFor <= BurstEvery", p.BurstFor, p.BurstEvery)
		}
	default:
		return fmt.Errorf("gen: Profile.Kind is %q, accepted %q, %q or %q", p.Kind, Steady, Ramp, Burst)
	}
	return nil
}

// RateAt is the target rate at offset elapsed into the schedule.
func (p Profile) RateAt(elapsed time.Duration) float64 {
	p = p.withDefaults()
	switch p.Kind {
	case Ramp:
		if elapsed >= p.RampOver {
			return p.Rate
		}
		f := float64(elapsed) / float64(p.RampOver)
		return p.RampFrom + (p.Rate-p.RampFrom)*f
	case Burst:
		// The burst opens each period, so a short run sees one too.
		if elapsed%p.BurstEvery < p.BurstFor {
			return p.Rate * p.BurstFactor
		}
	}
	return p.Rate
}
