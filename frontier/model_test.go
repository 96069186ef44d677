package frontier

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestModelRules(t *testing.T) {
	base := Model{Lambda: 3000, Service: 100e-6, CommitCost: 0.01, Latency: 0.01, LatencyHigh: 0.02}
	tests := []struct {
		name string
		ok   func(m Model) bool
	}{
		{"utilisation falls as the interval grows", func(m Model) bool { return m.Rho(0.05) > m.Rho(0.5) }},
		{"an interval that saturates the loop has infinite staleness", func(m Model) bool {
			return math.IsInf(m.Staleness(m.CommitCost/(1-m.Load())), 1)
		}},
		{"queueing delay grows as utilisation approaches one", func(m Model) bool {
			lo, hi := m, m
			lo.Lambda, hi.Lambda = 1000, 8000
			return hi.Wait(0.1) > lo.Wait(0.1)
		}},
		{"a long interval costs half of itself in staleness", func(m Model) bool {
			d := m.Staleness(100) - m.Staleness(50)
			return math.Abs(d-25) < 0.01
		}},
		{"a backlog beyond the steady queue adds drain time", func(m Model) bool {
			b := m
			b.Backlog = 10000
			return b.Wait(0.1) > m.Wait(0.1)+0.5
		}},
		{"rollback exposure grows with interval and restore time", func(m Model) bool {
			m.Hazard, m.Restore = 1e-3, 10
			r := m
			r.Restore = 20
			return m.Exposure(1) > m.Exposure(0.1) && r.Exposure(1) > m.Exposure(1) && m.Objective(1) > m.Staleness(1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok(base) {
				t.Fail()
			}
		})
	}
}

// TestMinimiseMatchesGrid compares the golden-section search with a dense
// grid on random models: the search must be within 0.5% of the grid's best.
func TestMinimiseMatchesGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 500; i++ {
		m := Model{
			Lambda:     r.Float64() * 9000,
			Service:    100e-6,
			CommitCost: 0.001 + r.Float64()*0.05,
			Latency:    0.01,
			Backlog:    float64(r.IntN(3)) * r.Float64() * 20000,
			Hazard:     r.Float64() * 1e-2,
			Restore:    r.Float64() * 30,
		}
		lo := max(0.005, m.CommitCost/max(0.95-m.Load(), 0.02))
		hi := 5.0
		if lo >= hi || math.IsInf(m.Objective(hi), 1) {
			continue
		}
		got := m.Objective(m.Minimise(lo, hi))
		best := math.Inf(1)
		for k := 0; k <= 4000; k++ {
			tt := lo * math.Pow(hi/lo, float64(k)/4000)
			best = math.Min(best, m.Objective(tt))
		}
		if got > best*1.005 {
			t.Fatalf("model %+v on [%v, %v]: search found J=%v, grid %v", m, lo, hi, got, best)
		}
	}
}

func TestCompiledObjectiveAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 1000; i++ {
		m := Model{Lambda: r.Float64() * 9000, Service: 100e-6, CommitCost: r.Float64() * 0.05, Latency: r.Float64() * 0.05,
			Backlog: r.Float64() * 1000, Hazard: r.Float64() * 1e-3, Restore: r.Float64() * 10}
		tt := 0.001 + r.Float64()*5
		want := m.Staleness(tt) + m.Hazard*(tt/2+m.Restore)*(tt/2+m.Restore)
		if got := m.Objective(tt); !(math.IsInf(want, 1) && math.IsInf(got, 1)) && math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Fatalf("model %+v T=%v: compiled J %v, from S %v", m, tt, got, want)
		}
	}
}
