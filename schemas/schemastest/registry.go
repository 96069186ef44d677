// Package schemastest provides an in-process fake Confluent Schema Registry
// for the marketplace schemas' tests. It is serde/srtest's fake, kept under
// this name for the tests that import it.
package schemastest

import (
	"testing"

	"github.com/tidemark-streams/tidemark/serde/srtest"
)

// Registry is srtest.Registry.
type Registry = srtest.Registry

// NewRegistry starts a fake registry that stops when the test ends.
func NewRegistry(t testing.TB) *Registry { return srtest.NewRegistry(t) }
