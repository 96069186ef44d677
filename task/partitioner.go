package task

// DefaultPartition is the partition Kafka's Java client (and franz-go's
// default partitioner) choose for a record with key bytes key: murmur2 of
// the key, made positive, modulo n. Using the same function in the test
// driver and the service means a topology sees the same co-partitioning in
// both. Null keys go to partition 0 here; the live producer may spread them.
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
