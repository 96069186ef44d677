package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// OffsetLimit caps, per input topic and partition, the offset a transaction
// commits for it: the first record fetched but not yet processed. The
// consumer's own offsets are those of the records it returned from polls;
// a record loop that keeps polled records queued for a later pass (see the
// processor's fair scheduling) must commit no further than its queue
// heads, or a crash would skip the queued records. A partition absent from
// the limit commits the consumer's offset.
type OffsetLimit map[string]map[int32]kgo.EpochOffset

// Lower lowers *offset (and *epoch with it) to the limit of topic/partition
// when the limit is below it.
func (l OffsetLimit) Lower(topic string, partition int32, offset *int64, epoch *int32) {
	if eo, ok := l[topic][partition]; ok && eo.Offset < *offset {
		*offset, *epoch = eo.Offset, eo.Epoch
	}
}

type offsetLimitKey struct{}

// WithOffsetLimit returns ctx under which End (of GroupTransactor and of
// AtLeastOnceTransactor) commits input offsets no higher than lim.
func WithOffsetLimit(ctx context.Context, lim OffsetLimit) context.Context {
	if len(lim) == 0 {
		return ctx
	}
	return context.WithValue(ctx, offsetLimitKey{}, lim)
}

func offsetLimitOf(ctx context.Context) OffsetLimit {
	lim, _ := ctx.Value(offsetLimitKey{}).(OffsetLimit)
	return lim
}
