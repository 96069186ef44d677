package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tidemark-streams/tidemark/frontier"
)

// tenantClassConfig is one entry of the config file's tenant_classes:
//
//	tenant_classes:
//	  gold:     {staleness_target: 50ms, tenants: [s1, s2]}
//	  flash:    {staleness_target: 2s, rate: 5000, burst: 500, tenants: [s9]}
//
// staleness_target is a Go duration ("" inherits staleness_target); rate is
// records per second per tenant (0: unlimited) and burst the bucket depth
// (only with a rate).
type tenantClassConfig struct {
	StalenessTarget string   `yaml:"staleness_target" json:"staleness_target"`
	Rate            float64  `yaml:"rate" json:"rate"`
	Burst           float64  `yaml:"burst" json:"burst"`
	Tenants         []string `yaml:"tenants" json:"tenants"`
}

// tenantOptions maps tenant_classes onto frontier.Options.Tenants, in class
// name order (so errors are deterministic); a field error names the class
// ("tenant_classes.gold.staleness_target").
func (c serviceConfig) tenantOptions() (map[string]frontier.TenantOptions, error) {
	if len(c.TenantClasses) == 0 {
		return nil, nil
	}
	var classes []frontier.TenantClass
	for _, name := range slices.Sorted(maps.Keys(c.TenantClasses)) {
		tc := c.TenantClasses[name]
		target, err := parseDuration("tenant_classes."+name+".staleness_target", tc.StalenessTarget)
		if err != nil {
			return nil, err
		}
		// 0 inherits staleness_target; frontier's own range error named
		// the Go field of the first tenant (Tenants["a"].StalenessTarget).
		if target != 0 && (target < minCommitSetting || target > maxCommitSetting) {
			return nil, fmt.Errorf("config: tenant_classes.%s.staleness_target %s: accepted range %v..%v (unset: staleness_target)",
				name, target, minCommitSetting, maxCommitSetting)
		}
		if tc.Rate < 0 || tc.Burst < 0 {
			return nil, fmt.Errorf("config: tenant_classes.%s: rate %v and burst %v must not be negative", name, tc.Rate, tc.Burst)
		}
		if tc.Burst > 0 && tc.Rate == 0 {
			// Burst is the depth of the rate's bucket: without a rate
			// the class is unlimited and the burst would do nothing.
			return nil, fmt.Errorf("config: tenant_classes.%s.burst %v needs tenant_classes.%s.rate: burst is the depth of the rate limit's bucket, and without a rate the class is not limited", name, tc.Burst, name)
		}
		classes = append(classes, frontier.TenantClass{Name: name, StalenessTarget: target, Rate: tc.Rate, Burst: tc.Burst, Tenants: tc.Tenants})
	}
	ts, err := frontier.ClassTenants(classes...)
	if err != nil {
		return nil, fmt.Errorf("config: tenant_classes: %w", err)
	}
	return ts, nil
}
