package changelog

import (
	"maps"
	"slices"
)

// RestoreListener hears of a restore's progress per changelog partition,
// the way Kafka Streams' StateRestoreListener does. Restore calls it on
// its own goroutine (the one that called Restore), never concurrently
// with itself, so an implementation shared by concurrent restores must
// synchronise; it must return quickly, as the restore waits for it.
//
// For each changelog partition with records to read (start offset below
// the end offset): OnRestoreStart once, before the first read;
// OnBatchRestored after each batch (a fetch's records of the partition,
// at most restoreBatchRecords of them) is applied to the restore's write
// batch, with the last offset it covered (markers included) and the
// records it applied (markers excluded, so it may be 0); OnRestoreEnd
// once the whole restore has been written, with the sum of the batches'
// counts. A restore that fails or is cancelled ends without OnRestoreEnd.
// Partitions already up to date hear nothing.
type RestoreListener interface {
	OnRestoreStart(tp TopicPartition, store string, startOffset, endOffset int64)
	OnBatchRestored(tp TopicPartition, store string, batchEndOffset, restored int64)
	OnRestoreEnd(tp TopicPartition, store string, totalRestored int64)
}

// restoreBatchRecords is the most records one OnBatchRestored covers: a
// fetch of small records can hold a partition's whole changelog, and a
// restore checks for cancellation and reports progress between batches.
const restoreBatchRecords = 10_000

// sortedStates orders a restore's partitions by topic and partition, for
// deterministic listener calls.
func sortedStates(byTP map[TopicPartition]*restoreState) []*restoreState {
	keys := slices.SortedFunc(maps.Keys(byTP), func(a, b TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	out := make([]*restoreState, len(keys))
	for i, k := range keys {
		out[i] = byTP[k]
	}
	return out
}
