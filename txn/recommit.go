package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction that consumed nothing (a punctuation's outputs, a frontier
// record, a window final emitted on wall-clock time) has no offsets to
// commit, and franz-go's GroupTransactSession.End then sends no
// TxnOffsetCommit. It decides whether the broker implements KIP-447 from
// that request's response, so without one it takes the pre-KIP-447 path:
// once the empty transaction commits, it holds the session's lock for
// another 500 ms, and the next End (and any rebalance callback) waits for
// it. On the test broker this showed as 500 ms stalls of every output a
// few seconds after a failover, when the survivor's frontier commit
// carried no input.
//
// So End re-commits, in such a transaction, one partition the session
// already committed, at the offset it committed, with the metadata the
// participants give it now (clocks and changelog positions only grow). The
// offsets do not move; the request tells franz-go the broker's version,
// and the group generation it carries fences the transaction as every
// other commit is fenced.

// recommit is the committed offset an empty transaction re-commits.
type recommit struct {
	topic     string
	partition int32
	at        kgo.EpochOffset
}

// emptyRecommit picks the partition to re-commit when the session has
// consumed nothing since its last commit: the first, in topic and
// partition order, that has a committed offset and metadata in md (a
// partition without metadata would lose what its commit carried). It
// returns nil when the transaction has offsets of its own to commit, or
// when no partition qualifies (then End behaves as franz-go does).
func emptyRecommit(cl *kgo.Client, md Metadata) *recommit {
	if len(md) == 0 || len(cl.UncommittedOffsets()) > 0 {
		return nil
	}
	committed := cl.CommittedOffsets()
	topics := make([]string, 0, len(committed))
	for topic := range committed {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		ps := make([]int32, 0, len(committed[topic]))
		for p := range committed[topic] {
			if _, ok := md[topic][p]; ok {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			p := slices.Min(ps)
			return &recommit{topic: topic, partition: p, at: committed[topic][p]}
		}
	}
	return nil
}

// addTo adds the re-commit to a TxnOffsetCommit that franz-go built with
// no partitions.
func (r *recommit) addTo(req *kmsg.TxnOffsetCommitRequest) {
	if r == nil || len(req.Topics) > 0 {
		return
	}
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = r.topic
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = r.partition, r.at.Offset, r.at.Epoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
}
