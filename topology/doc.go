// Package topology builds tidemark topologies: a typed, fluent DSL (Stream,
// Table, grouped and windowed streams, joins) and the Processor API, compiled
// into a validated logical graph of sources, processors, stores and sinks,
// split into sub-topologies at repartition topics.
//
// The package builds; it does not run. package processor executes a built
// Topology: it creates one task per sub-topology and input partition, feeds
// it records, tracks stream time and watermarks, fires punctuators and opens
// stores. The seam between the two is Topology.Instantiate and the TaskEnv
// interface: the task supplies time, stores and an output sink, the
// instantiated sub-topology supplies typed, allocation-light processing.
//
// Functions given to DSL operators (predicates, mappers, aggregators,
// joiners) are shared by every task of the topology and may be called from
// several tasks at once in the service: keep them free of shared mutable
// state. Per-task state belongs in a Processor (one instance per task) or in
// a store.
//
// Invariants a runtime may rely on:
//   - every processor, store and internal topic has a stable name
//     (see naming.go for the rule for generated names);
//   - every store a processor touches belongs to that processor's
//     sub-topology, so a task owns all of its state;
//   - inputs that must be co-partitioned (joins) are listed by
//     CopartitionGroups, for the runtime to check real partition counts at
//     startup (CheckCopartitioning).
package topology
