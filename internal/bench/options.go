package bench

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Workloads the harness knows.
var Workloads = []string{"stateless", "count", "windowed", "join"}

// DefaultSystems are the contenders of a default run. tidemark's own
// systems are included only when a "tidemark" worker is registered.
func DefaultSystems() []System {
	var out []System
	if _, ok := worker("tidemark"); ok {
		out = append(out,
			System{Name: "tidemark-adaptive", Kind: "tidemark", Policy: "adaptive"},
			System{Name: "tidemark-100ms", Kind: "tidemark", Policy: "fixed", CommitInterval: 100 * time.Millisecond},
			System{Name: "tidemark-1s", Kind: "tidemark", Policy: "fixed", CommitInterval: time.Second},
		)
	}
	return append(out,
		System{Name: "kstreams-100ms", Kind: "kstreams"},
		System{Name: "kstreams-30ms", Kind: "kstreams", CommitInterval: 30 * time.Millisecond},
		System{Name: "kstreams-nocache", Kind: "kstreams", NoCache: true},
		System{Name: "raw", Kind: "raw"},
		System{Name: "raw-txn", Kind: "raw-txn"},
	)
}

// ExtraSystems can be picked with --systems but are not in a default run:
// tidemark with two stream threads (processor.WithThreads), and with the
// count's record cache on (topology.WithRecordCache).
func ExtraSystems() []System {
	if _, ok := worker("tidemark"); !ok {
		return nil
	}
	return []System{
		{Name: "tidemark-adaptive-2t", Kind: "tidemark", Policy: "adaptive", Threads: 2},
		{Name: "tidemark-100ms-2t", Kind: "tidemark", Policy: "fixed", CommitInterval: 100 * time.Millisecond, Threads: 2},
		{Name: "tidemark-adaptive-cache", Kind: "tidemark", Policy: "adaptive", RecordCache: benchRecordCache},
	}
}

// Options configure a run. Zero fields take defaults from EnsureDefaults.
type Options struct {
	Brokers   []string
	Workloads []string
	Systems   []System
	// Records pre-produced for the throughput phase. Default 300k (quick 100k).
	Records int
	// Keys is the key-space size (Zipf-skewed). Default 10k.
	Keys int
	// SequentialKeys pre-produces every key in turn instead of Zipf draws,
	// so Records ≥ Keys puts exactly Keys keys into state (the resume test).
	SequentialKeys bool
	Partitions     int32
	// SweepWorkloads get the staleness-vs-rate sweep. Default count.
	SweepWorkloads []string
	// SweepFractions of the slowest system's maximum throughput, so every
	// system is measured at the same input rates. Default 0.2, 0.5, 0.8, 1.0.
	SweepFractions []float64
	// Rates, when set, are absolute sweep rates (records/s) instead.
	Rates           []float64
	Warmup, Measure time.Duration
	// Resume measures restart after SIGKILL on the count workload.
	Resume     bool
	WindowSize time.Duration
	Grace      time.Duration
	Quick      bool
	Env        Env
	WorkDir    string
}

// EnsureDefaults fills zero fields and validates the rest.
func (o *Options) EnsureDefaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("bench: Brokers is required (start one with `make kafka-up`)")
	}
	if len(o.Workloads) == 0 {
		o.Workloads = Workloads
		if o.Quick {
			o.Workloads = []string{"stateless", "count"}
		}
	}
	for _, w := range append(slices.Clone(o.Workloads), o.SweepWorkloads...) {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("bench: unknown workload %q (want one of %v)", w, Workloads)
		}
	}
	if len(o.Systems) == 0 {
		o.Systems = DefaultSystems()
	}
	if o.Records == 0 {
		o.Records = 300_000
		if o.Quick {
			o.Records = 100_000
		}
	}
	if o.Records < 10_000 {
		return fmt.Errorf("bench: Records %d is below 10000: too few to see more than one commit", o.Records)
	}
	if o.Keys == 0 {
		o.Keys = 10_000
	}
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.SweepWorkloads == nil {
		o.SweepWorkloads = []string{"count"}
	}
	if o.SweepFractions == nil {
		o.SweepFractions = []float64{0.2, 0.5, 0.8, 1.0}
		if o.Quick {
			o.SweepFractions = []float64{0.5}
		}
	}
	for _, f := range o.SweepFractions {
		if f <= 0 || f > 1.5 {
			return fmt.Errorf("bench: sweep fraction %v out of range (0, 1.5]", f)
		}
	}
	if o.Warmup == 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Measure == 0 {
		o.Measure = 10 * time.Second
		if o.Quick {
			o.Measure = 5 * time.Second
		}
	}
	if o.WindowSize == 0 {
		o.WindowSize = 5 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = 500 * time.Millisecond
	}
	if o.Env.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: own executable: %w", err)
		}
		o.Env.Self = self
	}
	if o.Env.Java == "" {
		o.Env.Java = "java"
	}
	if o.WorkDir == "" {
		d, err := os.MkdirTemp("", "tidemark-bench-")
		if err != nil {
			return err
		}
		o.WorkDir = d
	}
	return nil
}
