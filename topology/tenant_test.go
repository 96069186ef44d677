package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// WithTenant's function must take the source's key and value types: a
// mismatch is a Build error naming the source, like a timestamp extractor's.
func TestWithTenantTypeChecked(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("ok", serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).To("out1")
	if _, err := b.Build(); err != nil {
		t.Fatalf("matching tenant function: %v", err)
	}

	b = topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String(), topology.WithTenant(func(_ string, v int64) string { return "" })).To("out")
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalidTopology) || !strings.Contains(err.Error(), "tenant function") {
		t.Fatalf("mismatched tenant function: got %v, want ErrInvalidTopology about the tenant function", err)
	}
}
