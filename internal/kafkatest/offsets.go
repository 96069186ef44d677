package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidemark-streams/tidemark/txn"
)

// Committed is group's committed offset of every partition of topic that
// has one, read the way a restarting consumer reads it: partitions named,
// stable (a transactional commit still settling is waited for, not
// missed). Asked for all of a group's offsets, Kafka 4.1 leaves out a
// partition whose transactional commit's markers are still on their way,
// so a read right after a commit would see "never committed".
func Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cl := Client(t)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list partitions of %s: %v", topic, err)
	}
	var parts []int32
	for p := range ends[topic] {
		parts = append(parts, p)
	}
	for {
		got, err := txn.CommittedOffsets(ctx, cl, group, txn.Partitions{topic: parts})
		switch {
		case err == nil:
			if got[topic] == nil {
				return map[int32]int64{}
			}
			return got[topic]
		case !errors.Is(err, kerr.UnstableOffsetCommit) || ctx.Err() != nil:
			t.Fatalf("committed offsets of group %s on %s: %v", group, topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StableEnds is every partition of topic's last stable offset: the end a
// read_committed consumer reads up to, past every committed transaction's
// records and before any open transaction's. Unlike a fresh consumer's
// first fetch, it answers in one round trip, so a test can check what was
// committed at a given instant.
func StableEnds(t testing.TB, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	got, err := kadm.NewClient(Client(t)).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("last stable offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	got.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("last stable offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}
