package topology

// partitionedSink is implemented by sink operators: whether a custom
// partitioner (WithPartitioner) chooses their partitions.
type partitionedSink interface{ customPartitioner() bool }

func (o *sinkOp[K, V]) customPartitioner() bool { return o.partition != nil && !o.routed }

// PartitionedTopics returns the topics a sink or repartition of the
// topology writes with a custom partitioner (WithPartitioner): a key's
// partition there is the partitioner's, which needs the typed key and
// value, so an interactive query cannot compute it from the serialized key
// (processor.InPartition names it instead).
func (t *Topology) PartitionedTopics() map[string]bool {
	out := map[string]bool{}
	for _, n := range t.nodes {
		if ps, ok := n.impl.(partitionedSink); ok && n.kind == KindSink && ps.customPartitioner() {
			out[n.topics0()] = true
		}
	}
	return out
}
