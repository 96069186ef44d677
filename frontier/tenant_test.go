package frontier

import (
	"errors"
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

func TestClassTenants(t *testing.T) {
	ts, err := ClassTenants(
		TenantClass{Name: "gold", StalenessTarget: 20 * time.Millisecond, Tenants: []string{"a", "b"}},
		TenantClass{Name: "bulk", Rate: 100, Tenants: []string{"c"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || ts["a"].StalenessTarget != 20*time.Millisecond || ts["b"] != ts["a"] || ts["c"].Rate != 100 {
		t.Fatalf("ClassTenants = %+v", ts)
	}
	if _, err := ClassTenants(TenantClass{Name: "x", Tenants: []string{"a"}}, TenantClass{Name: "y", Tenants: []string{"a"}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("tenant in two classes: %v", err)
	}
	if _, err := ClassTenants(TenantClass{Name: "x"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("class without tenants: %v", err)
	}
}
