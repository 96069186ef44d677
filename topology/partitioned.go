package topology

// partitionedSink is implemented by sink operators: whether a custom
// partitioner (WithPartitioner) chooses their partitions, or the key
// inside a windowed key does.
type partitionedSink interface{ customPartitioner() bool }

func (o *sinkOp[K, V]) customPartitioner() bool {
	return (o.partition != nil && !o.routed) || (o.partitionBy != nil && !o.node.internal)
}

// PartitionedTopics returns the topics a sink or repartition of the
// topology writes with a custom partitioner (WithPartitioner), and the
// topics a sink writes windowed keys to (partitioned by the key inside the
// window): a key's partition there is not the default partitioner's of
// its serialized bytes, so an interactive query cannot compute it from
// them (processor.InPartition names it instead).
func (t *Topology) PartitionedTopics() map[string]bool {
	out := map[string]bool{}
	for _, n := range t.nodes {
		if ps, ok := n.impl.(partitionedSink); ok && n.kind == KindSink && ps.customPartitioner() {
			out[n.topics0()] = true
		}
	}
	return out
}
