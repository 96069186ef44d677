package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A default run writes its timestamped directory and <kind>-latest; a run
// with --out is an experiment and leaves <kind>-latest alone.
func TestResultsDirs(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 1, 4, 0, time.FixedZone("x", 3600))
	results := filepath.Join("/repo", "internal", "bench", "results")
	for _, c := range []struct {
		kind, out string
		want      []string
	}{
		{"tenants", "", []string{filepath.Join(results, "20261205-090104-tenants"), filepath.Join(results, "tenants-latest")}},
		{"failover", "", []string{filepath.Join(results, "20261205-090104-failover"), filepath.Join(results, "failover-latest")}},
		{"sweep", "/tmp/x", []string{"/tmp/x"}},
	} {
		if got := resultsDirs("/repo", c.kind, c.out, at); !slices.Equal(got, c.want) {
			t.Errorf("%s, out %q: %v, want %v", c.kind, c.out, got, c.want)
		}
	}
}
