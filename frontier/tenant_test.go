package frontier

import (
	"errors"
	"math"
	"strings"
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

// A tenant's Rate or Burst that is not a finite number was accepted:
// NaN < 0 is false. A NaN Burst made the tenant's bucket hold NaN tokens,
// which never admit, so every partition carrying the tenant was held for
// good; a NaN Rate silently meant "unlimited"; an infinite Burst admitted
// everything whatever the Rate. Validate names the field instead.
func TestOptionsRejectNonFiniteTenantRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts TenantOptions
		want string
	}{
		{"NaN rate", TenantOptions{Rate: math.NaN()}, `Tenants["a"].Rate`},
		{"infinite rate", TenantOptions{Rate: math.Inf(1)}, `Tenants["a"].Rate`},
		{"NaN burst", TenantOptions{Rate: 100, Burst: math.NaN()}, `Tenants["a"].Burst`},
		{"infinite burst", TenantOptions{Rate: 100, Burst: math.Inf(1)}, `Tenants["a"].Burst`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Tenants: map[string]TenantOptions{"a": tc.opts}}
			err := o.Validate()
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// Tenants[""] named the untenanted outputs (sources without WithTenant,
// punctuations, window finals), but no option of it ever applied: the
// controller puts "" in the default slot (Options.StalenessTarget) and
// admission control charges no record to "". Validate accepted it, so a
// target or rate set for it silently did nothing; ClassTenants already
// refuses an empty tenant name.
func TestOptionsRejectAnEmptyTenantName(t *testing.T) {
	o := Options{Tenants: map[string]TenantOptions{"": {StalenessTarget: 10 * time.Millisecond, Rate: 100}}}
	err := o.Validate()
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), `Tenants[""]`) || !strings.Contains(err.Error(), "StalenessTarget") {
		t.Fatalf("Validate() = %v, want an error naming Tenants[\"\"] and pointing at StalenessTarget", err)
	}
	if _, err := NewController(o); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("NewController accepted Tenants[\"\"]: %v", err)
	}
}
