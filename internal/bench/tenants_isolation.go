package bench

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// Isolation modes of the tenant burst measurement.
const (
	// IsolationOff is an application that does nothing about tenants, as
	// before issue #15: the input producer's default partitioner (murmur2
	// of the key, so every tenant shares every partition) and fair
	// scheduling turned off (processor.UnlimitedRecordsPerTaskPass: each
	// pass of the record loop processes everything polled).
	IsolationOff = "off"
	// IsolationDefault is the runtime's defaults after issue #15: fair
	// scheduling on (processor.DefaultMaxRecordsPerTaskPass), placement
	// left to the user, so the default partitioner.
	IsolationDefault = "default"
	// IsolationOn places the hot tenant on a dedicated input partition
	// (the last one) through processor.TenantPartitioner for the input
	// producer, so its burst queues behind its own task only; fair
	// scheduling bounds what that task takes per pass of the record loop;
	// with HotRate > 0 the hot tenant is also rate-limited at the source
	// (frontier.TenantOptions.Rate: its partition is paused, records are
	// delayed, never dropped or reordered).
	IsolationOn = "on"
)

// TenantIsolation is one mode's settings, handed to the worker in the Job.
type TenantIsolation struct {
	Mode string `json:"mode"`
	// Hot is the tenant that bursts.
	Hot string `json:"hot"`
	// HotRate, when > 0 with IsolationOn, rate-limits Hot at the source
	// (records/s).
	HotRate    float64 `json:"hot_rate,omitempty"`
	Partitions int32   `json:"partitions"`
}

// placement is IsolationOn's: the last partition is Hot's.
func (i TenantIsolation) placement() *topology.TenantPlacement {
	return topology.NewTenantPlacement(map[string][]int32{i.Hot: {i.Partitions - 1}})
}

// throttledPartitions are the input partitions whose records the mode
// rate-limits at the source: the hot tenant's own, with isolation on and
// a HotRate; none otherwise.
func (i TenantIsolation) throttledPartitions() []int32 {
	if i.Mode != IsolationOn || i.HotRate <= 0 {
		return nil
	}
	return []int32{i.Partitions - 1}
}

// String says which settings the mode applies, for the report.
func (i TenantIsolation) String() string {
	switch i.Mode {
	case IsolationOff:
		return "no isolation: default partitioner, fair scheduling off (UnlimitedRecordsPerTaskPass)"
	case IsolationDefault:
		return fmt.Sprintf("defaults: default partitioner, fair scheduling (%d records per task per pass)", processor.DefaultMaxRecordsPerTaskPass)
	}
	s := fmt.Sprintf("input and output placement %s (processor.TenantPartitioner, topology.WithPlacement), fair scheduling (%d records per task per pass)",
		i.placement(), processor.DefaultMaxRecordsPerTaskPass)
	if i.HotRate > 0 {
		s += fmt.Sprintf(", %s rate-limited to %.0f records/s at the source", i.Hot, i.HotRate)
	}
	return s
}

// producerOpts are the input producer's client options: with isolation on,
// the placement partitioner, which reads the tenant from the key
// "<tenant>/<sku>".
func (i TenantIsolation) producerOpts() ([]kgo.Opt, error) {
	if i.Mode != IsolationOn {
		return nil, nil
	}
	part, err := processor.TenantPartitioner(i.placement(), func(r *kgo.Record) string { return tenantOf(r.Key) })
	if err != nil {
		return nil, fmt.Errorf("bench tenants: placement partitioner: %w", err)
	}
	return []kgo.Opt{kgo.RecordPartitioner(part)}, nil
}

// sinkOpts are the output sink's options: with isolation on, the same
// placement as the input (topology.WithPlacement).
func (i TenantIsolation) sinkOpts() []topology.SinkOption {
	if i.Mode != IsolationOn {
		return nil
	}
	return []topology.SinkOption{topology.WithPlacement(i.placement())}
}

// appOpts are the app's options after the harness's own.
func (i TenantIsolation) appOpts() []processor.Option {
	switch i.Mode {
	case IsolationOff:
		return []processor.Option{processor.WithMaxRecordsPerTaskPass(processor.UnlimitedRecordsPerTaskPass)}
	case IsolationDefault:
		return nil
	}
	opts := []processor.Option{processor.WithMaxRecordsPerTaskPass(processor.DefaultMaxRecordsPerTaskPass)}
	if i.HotRate > 0 {
		opts = append(opts, processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyAdaptive,
			Tenants: map[string]frontier.TenantOptions{i.Hot: {Rate: i.HotRate}}}))
	}
	return opts
}
