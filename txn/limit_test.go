package txn

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOffsetLimitLowersOnlyAbove: a limit lowers an offset (and its epoch)
// above it, leaves one at or below it and other partitions alone, and
// travels on the context WithOffsetLimit returns.
func TestOffsetLimitLowersOnlyAbove(t *testing.T) {
	lim := OffsetLimit{"in": {0: kgo.EpochOffset{Epoch: 3, Offset: 100}}}
	for _, c := range []struct {
		p           int32
		off, want   int64
		epoch, wepo int32
	}{
		{0, 150, 100, 5, 3}, // queued records from 100 on: commit 100
		{0, 100, 100, 5, 5},
		{0, 90, 90, 5, 5},
		{1, 150, 150, 5, 5}, // no limit
	} {
		off, epoch := c.off, c.epoch
		lim.Lower("in", c.p, &off, &epoch)
		if off != c.want || epoch != c.wepo {
			t.Errorf("partition %d offset %d: lowered to %d epoch %d, want %d epoch %d", c.p, c.off, off, epoch, c.want, c.wepo)
		}
	}
	if got := offsetLimitOf(WithOffsetLimit(context.Background(), lim)); got["in"][0].Offset != 100 {
		t.Errorf("limit on the context: %v", got)
	}
	if ctx := context.Background(); WithOffsetLimit(ctx, nil) != ctx {
		t.Error("an empty limit changed the context")
	}
}
