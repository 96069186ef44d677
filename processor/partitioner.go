package processor

import "github.com/tidemark-streams/tidemark/task"

// DefaultPartition is the partition Kafka's Java client (and franz-go's
// default partitioner) choose for a record with key bytes key: murmur2 of
// the key, made positive, modulo n; null keys go to partition 0. It is
// task.DefaultPartition, kept here for services and tests that compute
// where the service writes a key.
func DefaultPartition(key []byte, n int32) int32 { return task.DefaultPartition(key, n) }
