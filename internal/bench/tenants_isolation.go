package bench

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/processor"
)

// TenantIsolation is what "isolation on" means in the tenant burst
// measurement; with On false every setting is the default, as an
// application that does nothing about tenants runs.
type TenantIsolation struct {
	On bool `json:"on"`
	// Hot is the tenant that bursts.
	Hot string `json:"hot"`
	// HotRate, when > 0, rate-limits Hot at the source (records/s).
	HotRate    float64 `json:"hot_rate,omitempty"`
	Partitions int32   `json:"partitions"`
}

// String says which settings the mode applies, for the report.
func (i TenantIsolation) String() string {
	if !i.On {
		return "default settings"
	}
	return "none available"
}

// producerOpts are the input producer's client options.
func (i TenantIsolation) producerOpts() []kgo.Opt { return nil }

// appOpts are the app's options after the harness's own.
func (i TenantIsolation) appOpts() []processor.Option { return nil }
