package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// tenant_classes map onto the controller's per-tenant options: each
// listed tenant gets its class's target and its own rate limit.
func TestRunConfigTenantClasses(t *testing.T) {
	path := writeFile(t, "tidemark.yaml", `brokers: [k:9092]
staleness_target: 5s
tenant_classes:
  gold: {staleness_target: 50ms, tenants: [s1, s2]}
  flash:
    staleness_target: 2s
    rate: 5000
    burst: 500
    tenants: [s9]
`)
	cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, defaultServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]frontier.TenantOptions{
		"s1": {StalenessTarget: 50 * time.Millisecond},
		"s2": {StalenessTarget: 50 * time.Millisecond},
		"s9": {StalenessTarget: 2 * time.Second, Rate: 5000, Burst: 500},
	}
	if len(s.commit.Tenants) != len(want) {
		t.Fatalf("tenants %v, want %v", s.commit.Tenants, want)
	}
	for k, v := range want {
		if s.commit.Tenants[k] != v {
			t.Fatalf("tenant %s: %+v, want %+v", k, s.commit.Tenants[k], v)
		}
	}
	if s.commit.StalenessTarget != 5*time.Second {
		t.Fatalf("default target %v, want 5s", s.commit.StalenessTarget)
	}
}

func TestRunConfigTenantClassErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"bad duration", "tenant_classes: {gold: {staleness_target: quick, tenants: [a]}}", `tenant_classes.gold.staleness_target "quick"`},
		{"unknown key", "tenant_classes: {gold: {staleness: 1s, tenants: [a]}}", "staleness"},
		{"no tenants", "tenant_classes: {gold: {staleness_target: 1s}}", `tenant class "gold" lists no tenants`},
		{"tenant in two classes", "tenant_classes: {gold: {tenants: [a]}, std: {tenants: [a]}}", `tenant "a" is in classes "gold" and "std"`},
		{"negative rate", "tenant_classes: {gold: {rate: -1, tenants: [a]}}", "tenant_classes.gold: rate -1"},
		// A burst without a rate limits nothing: it was taken silently.
		{"burst without rate", "tenant_classes: {flash: {burst: 500, tenants: [a]}}", "tenant_classes.flash.burst 500 needs tenant_classes.flash.rate"},
		// YAML's .nan and .inf: JSON has neither, and the error was
		// "json: unsupported value: NaN", naming no field.
		{"NaN rate", "tenant_classes: {gold: {rate: .nan, tenants: [a]}}", "tenant_classes.gold.rate: want a finite number, got .nan"},
		{"infinite burst", "tenant_classes: {gold: {rate: 100, burst: .inf, tenants: [a]}}", "tenant_classes.gold.burst: want a finite number, got .inf"},
		{"target out of range", "tenant_classes: {gold: {staleness_target: 2h, tenants: [a]}}", "tenant_classes.gold.staleness_target 2h0m0s: accepted range 1ms..1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "tidemark.yaml", "brokers: [k:9092]\n"+tc.file+"\n")
			cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, defaultServiceConfig())
			if err == nil {
				_, err = cfg.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
