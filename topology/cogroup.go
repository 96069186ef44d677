package topology

import (
	"fmt"
	"slices"

	"github.com/tidemark-streams/tidemark/serde"
)

// CogroupedStream is several grouped streams with the same key type that
// feed one aggregate per key (Kafka Streams' KIP-150 CogroupedKStream): each
// input folds its records into the shared aggregate with its own adder,
// so one store and one output table replace an aggregation per input
// followed by a chain of table-table joins.
//
//	summary := carts.GroupByKey().
//		Cogroup(func(id string, c Cart, s Summary) Summary { s.Items += c.Items; return s }).
//		Cogroup(payments.GroupByKey(), func(id string, p Payment, s Summary) Summary { s.Paid += p.Amount; return s }).
//		Cogroup(shipments.GroupBy(orderOf, serde.String()), func(id string, sh Shipment, s Summary) Summary { s.Shipped = true; return s }).
//		Aggregate(func() Summary { return Summary{} }, summarySerde, topology.Named("order-summary"))
//
// A CogroupedStream is a value: Cogroup returns a new one and leaves its
// receiver as it was, so a prefix can be shared by several cogroups.
// Nothing is added to the topology until Aggregate.
type CogroupedStream[K, VA any] struct {
	b      *Builder
	inputs []cogroupInput[K, VA]
}

// cogroupInput is one input of a cogroup, kept untyped in its value type V
// by the closure that turns it into a stream of steps once the aggregation
// is built (Aggregate), so that the inputs' types need not appear in
// CogroupedStream's.
type cogroupInput[K, VA any] struct {
	// b is the builder of the grouped stream, whose node n is already
	// partitioned by the key (GroupByKey and GroupBy repartition as
	// needed), and ks its key serde.
	b  *Builder
	n  *node
	ks serde.Serde[K]
	// steps adds the node turning each of the input's records into the
	// step that applies its adder, named by cfg (an empty name: generated).
	steps func(cfg *opConfig) Stream[K, cogroupStep[K, VA]]
}

// cogroupStep is the value every cogroup input is mapped to: a record's
// value bound to its input's adder. The inputs of a cogroup have different
// value types; as steps they have one, so they can be merged into one
// stream, in the order the task processes them, and folded by the
// aggregations grouped streams use (aggregateByKey, aggregateWindowed,
// aggregateSession) with no cogroup-specific copy of their logic. The
// price is one small allocation per record, the bound closure; steps only
// live within the task, never in a store or topic.
type cogroupStep[K, VA any] func(key K, agg VA) VA

// applyStep is the adder of the aggregation over the merged steps.
func applyStep[K, VA any](key K, step cogroupStep[K, VA], agg VA) VA { return step(key, agg) }

// Cogroup starts a cogroup with g as its first input; add folds one of
// g's records into a key's aggregate. Add further inputs with
// CogroupedStream.Cogroup, then build the aggregation with Aggregate, or
// window it first (CogroupWindowedBy, CogroupSessionWindowedBy).
func (g GroupedStream[K, V]) Cogroup[VA any](add func(key K, value V, agg VA) VA) CogroupedStream[K, VA] {
	return CogroupedStream[K, VA]{b: g.s.b}.Cogroup(g, add)
}

// Cogroup adds g as a further input: its records update the same aggregate
// with add. g must come from the same Builder and be a different grouped
// stream than the inputs already added (a stream added twice would apply
// both adders to each of its records; Build fails instead, naming the
// aggregation). g's value type may differ from the other inputs'.
func (c CogroupedStream[K, VA]) Cogroup[V any](g GroupedStream[K, V], add func(key K, value V, agg VA) VA) CogroupedStream[K, VA] {
	in := cogroupInput[K, VA]{b: g.s.b, n: g.s.n, ks: g.s.ks}
	in.steps = func(cfg *opConfig) Stream[K, cogroupStep[K, VA]] {
		s := g.s
		n := s.b.addNode(KindProcessor, "COGROUP", []*node{s.n}, cfg,
			opFunc[K, V, K, cogroupStep[K, VA]](func(_ *opEnv, next forwarder[K, cogroupStep[K, VA]]) (receiver[K, V], error) {
				return receiverFunc[K, V](func(r Record[K, V]) error {
					out := Record[K, cogroupStep[K, VA]]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers,
						Tombstone: r.Tombstone, NullKey: r.NullKey}
					if !r.Tombstone { // the aggregation skips tombstones: no step to bind
						v := r.Value
						out.Value = func(k K, agg VA) VA { return add(k, v, agg) }
					}
					return next.forward(out)
				}), nil
			}))
		return Stream[K, cogroupStep[K, VA]]{b: s.b, n: n, ks: s.ks}
	}
	if c.b == nil {
		c.b = g.s.b
	}
	// A new slice: c, and cogroups sharing its prefix, keep theirs.
	c.inputs = append(slices.Clip(c.inputs), in)
	return c
}

// Aggregate folds every input's records into one aggregate per key,
// starting from init(), each record with its own input's adder, in the
// order the task processes them: each partition in its own order, and
// across inputs as the runtime interleaves them (the service by record
// timestamp within what each poll returns, like Kafka Streams' choice of
// the head record with the lowest timestamp; the test driver in the order
// records are piped). So an order-sensitive aggregate (a list, a last
// value) is only as deterministic across inputs as that interleaving.
// It emits one update per input record, as GroupedStream.Aggregate
// does: the new aggregate, timestamped with the largest timestamp
// aggregated for the key so far. Records with a null key are dropped
// (DropNullKey) and tombstones skipped (DropSkipped), counted by the
// aggregation.
//
// The aggregate lives in one key-value store named by Named (else
// generated), logged to "<app>-<name>-changelog" unless WithoutChangelog;
// it is restored from there and updated in the task's transaction like
// any aggregation's, so exactly-once holds across inputs too.
//
// All inputs must be co-partitioned: a key's records must reach the same
// task whichever input they come from. GroupBy, and GroupByKey after a key
// change, already repartition an input by its key (through
// "<app>-<name>-repartition"); inputs read from user topics must be
// partitioned by the key with the same partition count. The inputs' topics
// are listed by CopartitionGroups under the aggregation's name and checked
// against real partition counts when the service starts; Build already
// fails (ErrNotCopartitioned) when the inputs' repartition topics have
// different fixed counts (WithPartitions). A repartition topic without a
// fixed count is sized as in Kafka Streams (Topology.CopartitionedCounts):
// like the inputs read from user topics, or, when all inputs are
// repartitioned, like one with a fixed count, else the largest.
func (c CogroupedStream[K, VA]) Aggregate(init func() VA, aggSerde serde.Serde[VA], opts ...StoreOption) Table[K, VA] {
	steps, ok := c.merge(newOpConfig(opts))
	if !ok {
		return Table[K, VA]{b: c.b}
	}
	t := aggregateByKey(steps, "COGROUP-AGGREGATE", aggSerde, opts, func(k K, step cogroupStep[K, VA], old VA, found bool) (VA, bool) {
		return fold(zeroInit(init), applyStep[K, VA], k, step, old, found), true
	})
	c.check(t.n.name)
	return t
}

// merge adds the nodes of a cogroup's inputs and the node merging them,
// named after the aggregation when it is named ("<name>-cogroup-<i>" for
// input i, "<name>-merge"). ok is false when there is nothing to merge: a
// zero CogroupedStream, recorded as a build error.
func (c CogroupedStream[K, VA]) merge(cfg *opConfig) (Stream[K, cogroupStep[K, VA]], bool) {
	var out Stream[K, cogroupStep[K, VA]]
	if c.b == nil {
		return out, false
	}
	if len(c.inputs) == 0 {
		c.b.fail(fmt.Errorf("%w: cogroup without inputs (start it with GroupedStream.Cogroup)", ErrInvalidTopology))
		return out, false
	}
	var ks serde.Serde[K]
	parents := make([]*node, 0, len(c.inputs))
	for i, in := range c.inputs {
		if in.b != c.b {
			continue // check reports it, naming the aggregation
		}
		s := in.steps(sideCfg(cfg, fmt.Sprintf("-cogroup-%d", i)))
		parents = append(parents, s.n)
		if ks == nil {
			ks = in.ks
		}
	}
	m := c.b.addNode(KindProcessor, "COGROUP-MERGE", parents, sideCfg(cfg, "-merge"),
		opFunc[K, cogroupStep[K, VA], K, cogroupStep[K, VA]](func(_ *opEnv, next forwarder[K, cogroupStep[K, VA]]) (receiver[K, cogroupStep[K, VA]], error) {
			return receiverFunc[K, cogroupStep[K, VA]](next.forward), nil
		}))
	return Stream[K, cogroupStep[K, VA]]{b: c.b, n: m, ks: ks}, true
}

// check validates the cogroup's inputs once its aggregation op exists, so
// that errors and the co-partitioning requirement name it: every input
// from the same builder, none added twice, and co-partitioned.
func (c CogroupedStream[K, VA]) check(op string) {
	inputs := make([]*node, 0, len(c.inputs))
	for i, in := range c.inputs {
		switch {
		case in.b != c.b:
			c.b.fail(errorf(op, "%w: cogroup input %d comes from a different builder", ErrInvalidTopology, i))
		case slices.Contains(inputs, in.n):
			c.b.fail(errorf(op, "%w: cogroup input %d is a grouped stream this cogroup already has", ErrInvalidTopology, i))
		default:
			inputs = append(inputs, in.n)
		}
	}
	c.b.requireCopartition(op, inputs...)
	checkFixedCopartition(c.b, op, inputs)
}

// checkFixedCopartition fails the build when the repartition topics
// upstream of inputs have fixed partition counts (WithPartitions) that
// differ: such inputs can never be co-partitioned, whatever the cluster.
// Counts the runtime chooses, and user topics' counts, are checked at
// startup (CheckCopartitioning).
func checkFixedCopartition(b *Builder, op string, inputs []*node) {
	fixed := map[string]int32{}
	for _, r := range b.repart {
		if r.Partitions > 0 {
			fixed[r.Name] = r.Partitions
		}
	}
	var first string
	var want int32
	for _, in := range inputs {
		for _, topic := range upstreamTopics(in) {
			n, ok := fixed[topic]
			if !ok {
				continue
			}
			if want == 0 {
				first, want = topic, n
			} else if n != want {
				b.fail(errorf(op, "%w: repartition topic %q has %d partitions (WithPartitions), %q has %d", ErrNotCopartitioned, first, want, topic, n))
				return
			}
		}
	}
}
