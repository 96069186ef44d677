package topology

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrInvalidPlacement is wrapped by every error about a TenantPlacement:
// a malformed placement, one that does not fit a topic's partition count,
// or a join whose inputs are placed differently.
var ErrInvalidPlacement = errors.New("invalid tenant placement")

// TenantPlacement places records on partitions by tenant: each named hot
// tenant gets dedicated partitions that no other tenant's records reach,
// and every other tenant (including the tenant "" of untenanted records)
// shares the partitions no hot tenant owns. Within its set a record goes to
// set[murmur2(key) mod len(set)] (a null key to the set's first
// partition), so one key of one tenant always lands on the same partition
// and the records of a key stay in order.
//
// Dedicated partitions are what isolates a hot tenant: partition p of a
// repartition topic is read by task p of the next sub-topology, so a hot
// tenant's burst queues behind its own tasks (and the transactions,
// commits and fetches of whichever instance owns them) instead of behind
// every tenant's. Within one partition records are processed and
// committed in offset order; placement is the only way to keep a burst
// from delaying other tenants' records without reordering them.
//
// Co-partitioning rule: the partition depends on (tenant, key), not on the
// key alone. A key must therefore never change tenant (otherwise its
// records, and the state kept for it, split across two partitions), and
// the inputs of a join or of a co-grouped aggregation must be placed with
// the same placement (equal dedicated sets, same partition count), or a
// key of a hot tenant would be looked up in another task than the one
// holding it. Build rejects a join whose repartitioned inputs are placed
// differently (see Topology.CheckPlacements for the partition counts); it
// cannot see how user input topics were produced, so producers that write
// the input topics of such a join must use the same placement, for
// example through processor.TenantPartitioner.
//
// A TenantPlacement is immutable and safe for concurrent use.
type TenantPlacement struct {
	dedicated map[string][]int32 // tenant → sorted, distinct partitions
	owner     map[int32]string   // dedicated partition → tenant
	maxPart   int32              // the highest dedicated partition, -1 when none
	err       error              // a malformed placement, reported at Build
}

// NewTenantPlacement returns the placement that gives each tenant in hot
// its listed partitions of every topic it is used for. Tenants' sets must
// be non-empty and disjoint, partitions non-negative, tenant names
// non-empty; a topic's partition count must exceed every listed partition
// and leave at least one partition to the other tenants. Problems are
// reported when the placement is used: by Build for options, by
// Validate, Partition and processor.TenantPartitioner otherwise. hot is
// copied.
func NewTenantPlacement(hot map[string][]int32) *TenantPlacement {
	p := &TenantPlacement{dedicated: make(map[string][]int32, len(hot)), owner: map[int32]string{}, maxPart: -1}
	for _, tenant := range slices.Sorted(maps.Keys(hot)) {
		parts := slices.Clone(hot[tenant])
		slices.Sort(parts)
		parts = slices.Compact(parts)
		switch {
		case tenant == "":
			p.fail(fmt.Errorf("%w: the tenant \"\" (untenanted records) cannot have dedicated partitions", ErrInvalidPlacement))
		case len(parts) == 0:
			p.fail(fmt.Errorf("%w: tenant %q has no dedicated partitions", ErrInvalidPlacement, tenant))
		case parts[0] < 0:
			p.fail(fmt.Errorf("%w: tenant %q: negative partition %d", ErrInvalidPlacement, tenant, parts[0]))
		}
		for _, q := range parts {
			if prev, dup := p.owner[q]; dup {
				p.fail(fmt.Errorf("%w: partition %d is dedicated to both %q and %q", ErrInvalidPlacement, q, prev, tenant))
				continue
			}
			p.owner[q] = tenant
			p.maxPart = max(p.maxPart, q)
		}
		p.dedicated[tenant] = parts
	}
	return p
}

func (p *TenantPlacement) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// Err reports a malformed placement (overlapping or empty sets, negative
// partitions, the tenant ""), independent of any topic; nil when well
// formed.
func (p *TenantPlacement) Err() error { return p.err }

// Dedicated returns the partitions dedicated to tenant (sorted), or nil
// for a tenant that shares the remaining partitions.
func (p *TenantPlacement) Dedicated(tenant string) []int32 {
	return slices.Clone(p.dedicated[tenant])
}

// DedicatedPartitions returns every partition dedicated to some hot
// tenant, sorted (the runtime pins their tasks to one stream thread).
func (p *TenantPlacement) DedicatedPartitions() []int32 {
	return slices.Sorted(maps.Keys(p.owner))
}

// Validate checks the placement against a topic with n partitions: every
// dedicated partition must exist and at least one must be left shared.
// The error names the topic and the counts.
func (p *TenantPlacement) Validate(topic string, n int32) error {
	if p.err != nil {
		return fmt.Errorf("topic %q: %w", topic, p.err)
	}
	if p.maxPart >= n {
		return fmt.Errorf("%w: topic %q has %d partitions, but partition %d is dedicated to %q", ErrInvalidPlacement, topic, n, p.maxPart, p.owner[p.maxPart])
	}
	if int32(len(p.owner)) >= n {
		return fmt.Errorf("%w: topic %q has %d partitions and all %d are dedicated, leaving none for the other tenants", ErrInvalidPlacement, topic, n, len(p.owner))
	}
	return nil
}

// Partition returns the partition of a record of tenant with key bytes key
// (nil for a null key) in a topic of n partitions. It fails only when the
// placement does not fit n (see Validate); the runtime validates at start,
// so a running sink never sees that.
func (p *TenantPlacement) Partition(tenant string, key []byte, n int32) (int32, error) {
	if err := p.Validate("", n); err != nil {
		return 0, err
	}
	return p.partition(tenant, key, n), nil
}

// partition assumes Validate(…, n) passed.
func (p *TenantPlacement) partition(tenant string, key []byte, n int32) int32 {
	if set, ok := p.dedicated[tenant]; ok {
		return set[pick(key, int32(len(set)))]
	}
	// The i-th shared partition: skip the dedicated ones, which are few.
	i := pick(key, n-int32(len(p.owner)))
	for q := int32(0); q < n; q++ {
		if _, ded := p.owner[q]; ded {
			continue
		}
		if i == 0 {
			return q
		}
		i--
	}
	return 0 // unreachable after Validate
}

// pick is the default partitioner's choice among n: murmur2 of the key,
// null keys first.
func pick(key []byte, n int32) int32 {
	if key == nil || n <= 1 {
		return 0
	}
	return DefaultPartition(key, n)
}

// Equal reports whether p and o place every record alike.
func (p *TenantPlacement) Equal(o *TenantPlacement) bool {
	if p == nil || o == nil {
		return p == o
	}
	return maps.EqualFunc(p.dedicated, o.dedicated, slices.Equal[[]int32])
}

// String lists the dedicated partitions: "hot=[0 1] vip=[2]; others share
// the rest".
func (p *TenantPlacement) String() string {
	if p == nil {
		return "default"
	}
	var sb strings.Builder
	for i, t := range slices.Sorted(maps.Keys(p.dedicated)) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%v", t, p.dedicated[t])
	}
	sb.WriteString("; others share the rest")
	return sb.String()
}

// WithPlacement places the records a sink or repartition writes by tenant
// (see TenantPlacement): the tenant is the one of the input record being
// processed (WithTenant, carried through repartitions), so outputs of
// punctuations, closed windows and suppress buffers, which carry the
// tenant "", go to the shared partitions: do not place a repartition
// behind such operators when a hot tenant's keys must stay on its
// dedicated partitions (the same key would arrive on two partitions). It
// excludes WithPartitioner. Give a GroupBy or Repartition that feeds a
// join the same placement as the join's other input.
func WithPlacement(p *TenantPlacement) SinkOption {
	return sinkOpt{repartitionOpt{func(c *opConfig) { c.placement = p }}}
}

// placedSink is implemented by sink operators: their placement, or nil.
type placedSink interface{ tenantPlacement() *TenantPlacement }

func (o *sinkOp[K, V]) tenantPlacement() *TenantPlacement { return o.placement }

// checkPlacementOption validates a sink's placement option at Build: it
// excludes a partitioner, must be well formed, and is checked against a
// repartition topic's fixed partition count.
func (b *Builder) checkPlacementOption(n *node, cfg *opConfig) {
	p := cfg.placement
	if p == nil {
		return
	}
	if cfg.partitioner != nil {
		b.fail(errorf(n.name, "%w: WithPlacement and WithPartitioner both choose partitions; give one", ErrInvalidTopology))
	}
	if p.err != nil {
		b.fail(errorf(n.name, "topic %q: %w", n.topics0(), p.err))
	} else if n.internal && cfg.hasPartitions {
		if err := p.Validate(n.topics0(), cfg.partitions); err != nil {
			b.fail(errorf(n.name, "%w", err))
		}
	}
}

// Placements returns the placement of every topic a placed sink writes.
func (t *Topology) Placements() map[string]*TenantPlacement {
	out := map[string]*TenantPlacement{}
	for _, n := range t.nodes {
		if ps, ok := n.impl.(placedSink); ok && n.kind == KindSink {
			if p := ps.tenantPlacement(); p != nil {
				out[n.topics0()] = p
			}
		}
	}
	return out
}

// CheckPlacements validates every sink placement against real partition
// counts (a topic of unknown count is skipped); the runtime calls it at
// startup next to CheckCopartitioning, the test driver when it starts.
func (t *Topology) CheckPlacements(partitions func(topic string) (int32, bool)) error {
	ps := t.Placements()
	for _, topic := range slices.Sorted(maps.Keys(ps)) {
		if n, ok := partitions(topic); ok && n > 0 {
			if err := ps[topic].Validate(topic, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkJoinPlacements rejects a join (a co-partition group) whose
// repartitioned inputs are placed differently: a key of a hot tenant
// would reach one side's dedicated partition and the other side's shared
// one. User source topics in a group are not checked: how they were
// produced is not in the topology.
func (t *Topology) checkJoinPlacements() error {
	ps := t.Placements()
	for _, g := range t.copart {
		var first string
		var want *TenantPlacement
		seen := false
		for _, topic := range g.Topics {
			if !t.IsRepartitionTopic(topic) {
				continue
			}
			p := ps[topic]
			if !seen {
				first, want, seen = topic, p, true
				continue
			}
			if !want.Equal(p) {
				return fmt.Errorf("operator %q: %w: its inputs are placed differently: %q by %v, %q by %v (give every input the same WithPlacement)",
					g.Operator, ErrInvalidPlacement, first, want, topic, p)
			}
		}
	}
	return nil
}

// DefaultPartition is the partition Kafka's Java client (and franz-go's
// default partitioner) choose for a record with key bytes key: murmur2 of
// the key, made positive, modulo n. Null keys go to partition 0 here; the
// live producer may spread them.
func DefaultPartition(key []byte, n int32) int32 {
	if n <= 1 || key == nil {
		return 0
	}
	return int32((murmur2(key) & 0x7fffffff) % uint32(n))
}

// murmur2 is Kafka's Utils.murmur2.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n * 4
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
