package txn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partitions names partitions by topic.
type Partitions map[string][]int32

// committedOffset is one partition's committed offset and its metadata.
type committedOffset struct {
	offset   int64
	metadata string
}

// fetchStable reads group's committed offsets of the named partitions,
// waiting for pending transactional commits to settle (RequireStable: the
// broker answers UNSTABLE_OFFSET_COMMIT until they do). A partition with no
// committed offset is absent from the answer.
//
// It names the partitions on purpose. Asked for all of a group's offsets,
// Kafka 4.1 lists only offsets already materialised, and leaves out a
// partition whose only commit is a transactional one still pending,
// instead of answering UNSTABLE_OFFSET_COMMIT for it: a commit in flight
// would read as "never committed".
func fetchStable(ctx context.Context, cl *kgo.Client, group string, parts Partitions) (map[string]map[int32]committedOffset, error) {
	out := map[string]map[int32]committedOffset{}
	if len(parts) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.RequireStable = true
	for _, topic := range slices.Sorted(maps.Keys(parts)) {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = slices.Sorted(slices.Values(parts[topic]))
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("txn: fetch committed offsets of group %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("txn: fetch committed offsets of group %s: %w", group, err)
	}
	var perr error
	add := func(topic string, p int32, code int16, at int64, md *string) {
		if err := kerr.ErrorForCode(code); err != nil {
			perr = errors.Join(perr, fmt.Errorf("txn: committed offset %s/%d: %w", topic, p, err))
			return
		}
		if at < 0 {
			return
		}
		if out[topic] == nil {
			out[topic] = map[int32]committedOffset{}
		}
		co := committedOffset{offset: at}
		if md != nil {
			co.metadata = *md
		}
		out[topic][p] = co
	}
	if len(resp.Groups) > 0 { // v8+
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("txn: fetch committed offsets of group %s: %w", group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.ErrorCode, p.Offset, p.Metadata)
			}
		}
	} else {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.ErrorCode, p.Offset, p.Metadata)
			}
		}
	}
	if perr != nil {
		return nil, perr
	}
	return out, nil
}

// CommittedMetadata reads the metadata stored with group's committed
// offsets of the named partitions, stable ones (see fetchStable). A
// partition with no committed offset is absent.
func CommittedMetadata(ctx context.Context, cl *kgo.Client, group string, parts Partitions) (map[string]map[int32]string, error) {
	return fetchStableAs(ctx, cl, group, parts, func(co committedOffset) string { return co.metadata })
}

// CommittedOffsets reads group's committed offsets of the named partitions,
// stable ones (see fetchStable). A partition with no committed offset is
// absent; one whose transactional commit is still pending fails with
// kerr.UnstableOffsetCommit, which callers retry.
func CommittedOffsets(ctx context.Context, cl *kgo.Client, group string, parts Partitions) (map[string]map[int32]int64, error) {
	return fetchStableAs(ctx, cl, group, parts, func(co committedOffset) int64 { return co.offset })
}

func fetchStableAs[T any](ctx context.Context, cl *kgo.Client, group string, parts Partitions, field func(committedOffset) T) (map[string]map[int32]T, error) {
	got, err := fetchStable(ctx, cl, group, parts)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]T{}
	for topic, ps := range got {
		out[topic] = map[int32]T{}
		for p, co := range ps {
			out[topic][p] = field(co)
		}
	}
	return out, nil
}
