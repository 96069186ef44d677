package task

import "github.com/tidemark-streams/tidemark/topology"

// DefaultPartition is the partition Kafka's Java client (and franz-go's
// default partitioner) choose for a record with key bytes key: murmur2 of
// the key, made positive, modulo n. Using the same function in the test
// driver and the service means a topology sees the same co-partitioning in
// both. Null keys go to partition 0 here; the live producer may spread them.
// It is topology.DefaultPartition, which tenant placements hash with too.
func DefaultPartition(key []byte, n int32) int32 { return topology.DefaultPartition(key, n) }
