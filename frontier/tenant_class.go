package frontier

import (
	"fmt"
	"time"
)

// TenantClass gives several tenants the same isolation settings: a
// service usually has a few classes (gold, standard, bulk) rather than
// per-tenant numbers. Its fields mean what TenantOptions' do, for every
// tenant listed.
type TenantClass struct {
	// Name names the class in errors and config files.
	Name string
	// StalenessTarget is each member's target; 0 inherits
	// Options.StalenessTarget.
	StalenessTarget time.Duration
	// Rate and Burst are each member's own token bucket (not shared by
	// the class): records per second, 0 for unlimited, and its depth.
	Rate, Burst float64
	// Tenants are the members, by the tenant names the sources give
	// (topology.WithTenant). A tenant may be in one class only.
	Tenants []string
}

// ClassTenants expands classes into Options.Tenants. A tenant listed in two
// classes, an empty tenant name, a class without tenants or a negative
// field is an error naming the class; ranges are checked later by
// Options.Validate. Tenants in no class get Options.StalenessTarget.
func ClassTenants(classes ...TenantClass) (map[string]TenantOptions, error) {
	out := map[string]TenantOptions{}
	in := map[string]string{}
	for _, c := range classes {
		switch {
		case len(c.Tenants) == 0:
			return nil, fmt.Errorf("%w: tenant class %q lists no tenants", ErrInvalidOptions, c.Name)
		case c.StalenessTarget < 0 || c.Rate < 0 || c.Burst < 0:
			return nil, fmt.Errorf("%w: tenant class %q: staleness target, rate and burst must not be negative", ErrInvalidOptions, c.Name)
		}
		for _, t := range c.Tenants {
			if t == "" {
				return nil, fmt.Errorf("%w: tenant class %q lists an empty tenant name", ErrInvalidOptions, c.Name)
			}
			if prev, dup := in[t]; dup {
				return nil, fmt.Errorf("%w: tenant %q is in classes %q and %q", ErrInvalidOptions, t, prev, c.Name)
			}
			in[t] = c.Name
			out[t] = TenantOptions{StalenessTarget: c.StalenessTarget, Rate: c.Rate, Burst: c.Burst}
		}
	}
	return out, nil
}
