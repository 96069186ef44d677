package frontier

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// operatingPointCost is a commit's cost when most of its per-record part
// follows the interval it was planned at (the records an interval carries
// on average) and little follows its own size: 2.5 ms + 3.4 µs per record
// of the interval's mean, 0.9 µs per record off it, as the real broker's
// commits looked at 50% load (fit_span.go).
func operatingPointCost(mean, x float64) float64 {
	return 0.0025 + 3.4e-6*mean + 0.9e-6*(x-mean)
}

func TestSpanFitTakesTheSlopeAcrossIntervals(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var span spanFit
	var at50 sizeFit
	now := 0.0
	for _, p := range []struct{ interval, mean float64 }{{0.020, 1540}, {0.050, 3850}} {
		for range 200 {
			x := p.mean * (0.6 + 0.8*rng.Float64())
			y := operatingPointCost(p.mean, x) + 0.0005*rng.NormFloat64()
			span.observe(p.interval, x, y, now)
			if p.interval == 0.050 {
				at50.observe(x, y, p.interval)
			}
			now += p.interval
		}
	}
	// What the size fit's regression reads at 50 ms (fit itself may
	// withhold it while the recent sizes vary too little).
	mx, my, vx, cxy, _ := at50.moments()
	if b := cxy / vx; my-b*mx < 0.010 {
		t.Fatalf("precondition: the size fit at 50 ms reads a large intercept (a=%v b=%v)", my-b*mx, b)
	}
	// Each bin's means are EWMAs of its last few dozen commits, so the
	// line through two bins is noisy: over 20,000 seeds the slope fell in
	// 2.8–4.5 µs and the intercept in 0–4.4 ms. Either way far from the
	// size fit's 0.9 µs and ≥ 10 ms.
	b, ok := span.slope(now)
	if !ok || b < 2.4e-6 || b > 4.9e-6 {
		t.Fatalf("slope across 20 and 50 ms %v (ok %v), want about 3.4µs", b, ok)
	}
	ia, _, ok := at50.through(b)
	if !ok || ia > 0.006 {
		t.Errorf("intercept through the 50 ms commits with the span slope %v (ok %v), want about 2.5ms", ia, ok)
	}
}

func TestSpanFitNeedsTwoIntervals(t *testing.T) {
	var one spanFit
	for i := range 100 {
		x := 1000 + float64(i%5)*500
		one.observe(0.020, x, 0.002+3e-6*x, float64(i)*0.02)
	}
	if _, ok := one.slope(2); ok {
		t.Error("a slope across intervals from commits planned at one")
	}

	// Two intervals whose commits cost the same: the cost is per commit.
	var flat spanFit
	now := 0.0
	for _, iv := range []float64{0.020, 0.050} {
		for range 50 {
			flat.observe(iv, iv*77000, 0.008, now)
			now += iv
		}
	}
	if b, ok := flat.slope(now); !ok || b != 0 {
		t.Errorf("slope %v (ok %v) from the same cost at 20 and 50 ms, want 0 and ok", b, ok)
	}

	// A bin the interval left a few minutes ago no longer counts.
	if _, ok := flat.slope(now + 10*spanAge); ok {
		t.Error("a slope from bins last seen minutes ago")
	}
}

// TestModelTakesTheSpanSlope: with a slope across intervals the model's
// per-commit cost is the line's intercept through the recent commits, not
// the size fit's.
func TestModelTakesTheSpanSlope(t *testing.T) {
	c, err := NewController(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.at(t0)
	c.processed.cost = 5e-6
	rng := rand.New(rand.NewPCG(1, 2))
	now := 0.0
	for _, p := range []struct{ interval, mean float64 }{{0.020, 1540}, {0.050, 3850}} {
		for range 200 {
			x := p.mean * (0.6 + 0.8*rng.Float64())
			y := operatingPointCost(p.mean, x)
			c.costSpan.observe(p.interval, x, y, now)
			c.costFit.observe(x, y, p.interval)
			now += p.interval
		}
	}
	c.spanCost, _ = c.costSpan.slope(now)
	m := c.model()
	if math.Abs(m.CostPerRecord-3.4e-6) > 0.2e-6 || math.Abs(m.CommitCost-0.0025) > 0.0005 {
		t.Errorf("model cost %v + %v per record, want 2.5ms + 3.4µs", m.CommitCost, m.CostPerRecord)
	}
	c.processed.cost = 3e-6 // below the slope: it reads noise
	if m := c.model(); m.CostPerRecord == c.spanCost {
		t.Errorf("span slope %v used above the per-record processing time", m.CostPerRecord)
	}
}
