package frontier

import (
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64
		burst  float64
		takes  []float64 // at t0 + i·10ms
		wantOK []bool
	}{
		{"burst is admitted at once", 100, 3, []float64{1, 1, 1}, []bool{true, true, true}},
		{"a refill at the take rate keeps admitting", 100, 1, []float64{1, 1, 1}, []bool{true, true, true}},
		{"a slow refill refuses", 10, 1, []float64{1, 1}, []bool{true, false}},
		{"a batch larger than the burst is admitted into debt", 100, 2, []float64{5, 1, 1, 1, 1}, []bool{true, false, false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewTokenBucket(t0, tt.rate, tt.burst)
			for i, n := range tt.takes {
				ok, wait := b.Take(t0.Add(time.Duration(i)*10*time.Millisecond), n)
				if ok != tt.wantOK[i] {
					t.Fatalf("take %d of %v: ok %v (wait %v), want %v; tokens %v", i, n, ok, wait, tt.wantOK[i], b.tokens)
				}
				if !ok && wait <= 0 {
					t.Fatalf("take %d refused without a wait", i)
				}
			}
		})
	}
}
