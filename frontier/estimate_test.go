package frontier

import (
	"math"
	"testing"
	"time"
)

func TestFlowRateDoesNotDependOnReportingCadence(t *testing.T) {
	for _, every := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond} {
		f := newFlow(500*time.Millisecond, 20*time.Millisecond)
		const rate = 4000.0
		for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(every) {
			n := int(rate * every.Seconds())
			f.add(now, n, time.Duration(n)*50*time.Microsecond)
		}
		if math.Abs(f.rate-rate)/rate > 0.01 {
			t.Errorf("reporting every %v: rate %v, want %v", every, f.rate, rate)
		}
		if math.Abs(f.cost-50e-6) > 1e-9 {
			t.Errorf("reporting every %v: cost %v, want 50µs", every, f.cost)
		}
	}
}

func TestFlowSilenceDecaysRate(t *testing.T) {
	f := newFlow(500*time.Millisecond, 20*time.Millisecond)
	for now := t0; now.Before(t0.Add(5 * time.Second)); now = now.Add(10 * time.Millisecond) {
		f.add(now, 10, 0)
	}
	before := f.rate
	f.advance(t0.Add(5*time.Second + 2*time.Second)) // 2s = 4τ of silence
	if f.rate > before*math.Exp(-3.5) {
		t.Fatalf("after 4τ of silence rate %v, want < %v", f.rate, before*math.Exp(-3.5))
	}
}

func TestMeanDevShrugsOffOneOutlier(t *testing.T) {
	var e meanDev
	for i := 0; i < 100; i++ {
		e.observe(0.010)
	}
	e.observe(1.0) // one 100× outlier
	if e.mean > 0.010+1.0/8+1e-9 {
		t.Fatalf("mean %v moved by more than the gain share of the outlier", e.mean)
	}
	for i := 0; i < 40; i++ {
		e.observe(0.010)
	}
	if e.mean > 0.011 {
		t.Fatalf("mean %v did not recover within 40 samples", e.mean)
	}
}

func TestHazardPosterior(t *testing.T) {
	h := newHazard(24 * time.Hour)
	h.advance(t0)
	if got, want := h.rate(), 1/(24*3600.0); math.Abs(got-want) > 1e-12 {
		t.Fatalf("prior rate %v, want %v", got, want)
	}
	h.fail(t0.Add(time.Hour))
	h.fail(t0.Add(2 * time.Hour))
	if h.rate() <= 1/(24*3600.0) {
		t.Fatal("two failures in two hours did not raise the hazard rate")
	}
	h.advance(t0.Add(1000 * time.Hour))
	if h.rate() >= 3/(24*3600.0) {
		t.Fatalf("a thousand failure-free hours left the rate at %v", h.rate())
	}
}
