// Package topology builds tidemark topologies: a typed, fluent DSL (Stream,
// Table, grouped and windowed streams, joins) and the Processor API, compiled
// into a validated logical graph of sources, processors, stores and sinks,
// split into sub-topologies at repartition topics.
//
// The package builds; it does not run. Package task executes a built
// Topology, one task per sub-topology and input partition: it feeds the
// task records, tracks stream time and watermarks, fires punctuators and
// opens stores; package processor runs those tasks as a consumer-group
// service, processor/tidemarktest in memory. The seam between this package
// and the task is Topology.Instantiate and the TaskEnv interface: the task
// supplies time, stores and an output sink, the instantiated sub-topology
// supplies typed, allocation-light processing.
//
// Functions given to DSL operators (predicates, mappers, aggregators,
// joiners) are shared by every task of the topology and may be called from
// several tasks at once in the service: keep them free of shared mutable
// state. Per-task state belongs in a Processor (one instance per task) or in
// a store.
//
// # Null keys, empty keys and tombstones
//
// Kafka keys and values may be null, and a null key is not an empty one.
// Records carry both facts as flags (Record.NullKey, Record.Tombstone) next
// to the zero K or V, and every operator follows Kafka Streams 4.x
// (including KIP-962 for joins):
//
//   - Sources set NullKey when the Kafka key is null and Tombstone when the
//     value is; an empty key or value is decoded by the serde like any other
//     bytes, so a string-keyed count keeps "" and null apart. A key or value
//     that the serde reads as null (serde.Nuller: serde.JSON's null) counts
//     as null too, as in Kafka Streams, where a deserializer returning null
//     makes a null key or a tombstone; global tables do the same.
//   - Stateless operators (Filter, FilterNot, MapValues, FlatMapValues,
//     Peek, Foreach, Merge, branches, Process) pass a null key through. Their
//     functions see the zero K; a Processor sees Record.NullKey.
//   - Operators that compute a new key (Map, SelectKey, FlatMap, GroupBy,
//     Table.GroupBy) make it null when the function returns a nil pointer,
//     interface, slice or map, Go's spelling of Kafka Streams' null. Keys of
//     other types are never null after them: that is how null-keyed records
//     are re-keyed from their values.
//   - Aggregations (Count, Reduce, Aggregate; windowed, session and sliding
//     too), tables read from topics and ToTable drop records with a null
//     key, before they touch the operator's clock. Table.GroupBy drops the
//     rows it maps to a null key, and those it maps to a null (nil) value.
//   - Inner joins drop records with a null key. Left joins emit a left record
//     with a null key at once, unjoined, with its null key; outer joins do so
//     for either input; a right record with a null key in a left join is
//     dropped. Stream-stream joins still advance their stream time on such
//     records, as Kafka Streams does.
//   - Stream-global joins (JoinGlobal, LeftJoinGlobal) look up the key
//     their keyOf maps the record to, so a null stream key is fine; a null
//     mapped key (a nil pointer, slice, map or interface) is dropped by the
//     inner join and emitted unjoined by the left join. A global table
//     ignores records of its topic with a null key.
//   - A repartition (GroupBy, GroupByKey or a join after a key change,
//     Repartition) drops records with a null key unless a left or outer join
//     or a stream-global join is downstream, in which case the topic carries
//     the null key.
//   - Sinks write a null key as a null Kafka key and an empty one as an
//     empty key, never the encoding of the zero K.
//   - Tombstones pass through stateless operators (MapValues does not call
//     its function), delete table rows, and are skipped by aggregations,
//     joins, FlatMap and FlatMapValues.
//   - A value that Map, MapValues, FlatMap or FlatMapValues returns nil (a
//     nil pointer, interface, slice or map) makes its record a tombstone,
//     Kafka Streams' null value: an aggregation skips it, ToTable deletes
//     the row, as they would after a repartition or a sink, where the serde
//     writes it as null.
//
// Every record an operator drops or skips this way is counted with its
// operator and reason (TaskEnv.Dropped: DropNullKey, DropSkipped, ...),
// where Kafka Streams counts some and filters others silently.
//
// Invariants a runtime may rely on:
//   - every processor, store and internal topic has a stable name
//     (see naming.go for the rule for generated names);
//   - every store a processor touches belongs to that processor's
//     sub-topology, so a task owns all of its state;
//   - inputs that must be co-partitioned (joins) are listed by
//     CopartitionGroups, for the runtime to check real partition counts at
//     startup (CheckCopartitioning);
//   - a null Kafka key stays null (Record.NullKey) until an operator
//     computes a new key, and a sink writes it as a null key; an empty key
//     is never taken for a null one;
//   - a record an operator cannot process (undecodable, an invalid
//     timestamp, late, a tombstone where a value is needed, a null key where
//     a key is needed) is counted through TaskEnv.Dropped with the operator
//     and the reason, never dropped silently. Records a predicate rejects,
//     or an inner join finds no partner for, are results, not drops.
package topology
