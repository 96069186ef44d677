package topology

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one typed record flowing through a topology.
//
// Tombstone marks a delete: a record whose value bytes were null. Its Value
// is the zero value of V. Sinks write tombstones as null values and tables
// delete their key. Operators that do not compute a new value (Filter,
// SelectKey, Peek, Merge, Repartition, branches, sinks) pass tombstones
// through; Map passes the flag on with the mapped key, MapValues skips the
// mapper and forwards a tombstone; FlatMap, FlatMapValues, aggregations and
// joins skip tombstones and count them as skipped (DropSkipped), the way
// Kafka Streams skips null values.
//
// NullKey marks a record whose key bytes were null; its Key is the zero
// value of K. An empty key (zero bytes) is an ordinary key, decoded by the
// key serde, and never a null one: a string-keyed count keeps "" and null
// apart. Operators treat null keys as Kafka Streams 4.x does (see the
// package documentation): keyed state (aggregations, tables) and inner joins drop them
// (DropNullKey), left and outer joins emit them unjoined, stateless
// operators pass them through, and sinks write a null Kafka key.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp int64 // event time, ms since the epoch
	Headers   []Header
	Tombstone bool
	NullKey   bool
}

// InputRecord is a serialized record consumed from a source topic partition.
// The task does not keep rec or its slices after processing it, so callers
// may reuse both.
type InputRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte // nil is a tombstone
	Timestamp int64  // the record timestamp from Kafka, ms since the epoch
	Headers   []Header
}

// OutputRecord is a serialized record produced to a sink topic. Its slices
// are only valid during TaskEnv.Emit: copy them to keep them.
type OutputRecord struct {
	Topic string
	// Partition is the partition a user partitioner chose, or -1 for the
	// default partitioner (murmur2 of the key bytes, like the Java client).
	Partition int32
	Key       []byte
	Value     []byte // nil is a tombstone
	Timestamp int64
	Headers   []Header
	// Node is the sink node that produced the record.
	Node string
	// Set by the task, for the runtime's frontier and staleness accounting:
	// InputTimestamp is the Kafka timestamp of the input record whose
	// processing produced this one (-1 when a punctuator produced it), and
	// StreamTime the task's stream time then, the largest event time of
	// every input the output can depend on.
	InputTimestamp int64
	StreamTime     int64
	// Tenant is the tenant of the input record whose processing produced
	// this one (see WithTenant), "" when a punctuator produced it or its
	// source names no tenant.
	Tenant string
}

// RecordMeta locates the input record being processed.
type RecordMeta struct {
	Topic     string
	Partition int32
	Offset    int64
}
