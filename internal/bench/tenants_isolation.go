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
	// IsolationApart is the floor under any isolation within the app: the
	// hot tenant's records the app would not admit go to a topic of their
	// own that the app does not read (placed as with IsolationOn, fair
	// scheduling on), so its burst still loads the broker, the input
	// producer and the machine's shared cores but none of the app's record
	// loops, fetches or commits. With HotRate, the hot tenant's records up
	// to that rate still go to the input (what IsolationOn admits, with no
	// hold, queue or pause to pay for it), so the app's own load is
	// IsolationOn's; without, none do. The quiet tenants' rise in this mode
	// is what the burst costs them before the app does anything.
	IsolationApart = "apart"
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

// places reports whether the mode places the hot tenant on a partition of
// its own.
func (i TenantIsolation) places() bool { return i.Mode == IsolationOn || i.Mode == IsolationApart }

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
	case IsolationApart:
		what := fmt.Sprintf("%s's records", i.Hot)
		if i.HotRate > 0 {
			what = fmt.Sprintf("%s's records over %.0f/s (its steady rate if that is higher)", i.Hot, i.HotRate)
		}
		return fmt.Sprintf("floor: %s in a topic of their own that the app does not read (the burst loads the broker, the producer and the cores, not the app); fair scheduling (%d records per task per pass)",
			what, processor.DefaultMaxRecordsPerTaskPass)
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
	if !i.places() {
		return nil, nil
	}
	part, err := processor.TenantPartitioner(i.placement(), func(r *kgo.Record) string { return tenantOf(r.Key) })
	if err != nil {
		return nil, fmt.Errorf("bench tenants: placement partitioner: %w", err)
	}
	return []kgo.Opt{kgo.RecordPartitioner(part)}, nil
}

// apartTopic is where, with IsolationApart, the input producer sends the
// hot tenant's records the app is not to read: a topic of the job's own
// (deleted with its other topics); "" in the other modes.
func (i TenantIsolation) apartTopic(job Job) string {
	if i.Mode == IsolationApart {
		return job.AppID + "-apart"
	}
	return ""
}

// readFactor is, as a multiple of the hot tenant's steady rate per, the
// rate of its records the input gets during a burst of factor × per: all
// of them, but with IsolationApart only up to HotRate (never below the
// steady rate), or none without a HotRate. The rest go to apartTopic.
func (i TenantIsolation) readFactor(per, factor float64) float64 {
	if i.Mode != IsolationApart {
		return factor
	}
	if i.HotRate <= 0 || per <= 0 {
		return 0
	}
	return min(factor, max(1, i.HotRate/per))
}

// sinkOpts are the output sink's options: with isolation on, the same
// placement as the input (topology.WithPlacement).
func (i TenantIsolation) sinkOpts() []topology.SinkOption {
	if !i.places() {
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
	if i.HotRate > 0 && i.Mode == IsolationOn {
		opts = append(opts, processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyAdaptive,
			Tenants: map[string]frontier.TenantOptions{i.Hot: {Rate: i.HotRate}}}))
	}
	return opts
}
