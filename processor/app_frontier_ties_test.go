package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestFrontierNeverClaimsALaterTransactionsOutput replays every claim the
// application ever committed to its frontier topic against the final
// output log: a claim of watermark W with offsets O says every output
// stamped at or before W is below O. Producers stamp many records in one
// millisecond, so the input comes in runs of records sharing a timestamp,
// and commits fall inside runs: a frontier that took the stream time
// itself for covered claimed the rest of a run before its transaction.
func TestFrontierNeverClaimsALaterTransactionsOutput(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "frontier-ties")
	t0 := windowBase()
	// Runs of runLen records share a millisecond, and every produce
	// request ends in the middle of a run: the record loop processes what
	// one fetch brings before it commits, so a commit boundary falls
	// between two records of a run.
	const batches, batchLen, runLen = 100, 40, 20
	// Commits as often as they can go: the more boundaries, the more of
	// them inside a run.
	_, stop := runApp(t, statelessApp(t, appID, in, out), processor.WithInstanceID("ties"),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: time.Millisecond}))
	defer stop()
	producer := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	n, ts := 0, t0
	for range batches {
		var recs []*kgo.Record
		for range batchLen {
			ts = t0 + 1 + int64((n+runLen/2)/runLen)
			recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Key: []byte(fmt.Sprintf("k%d", n%7)),
				Value: []byte("v"), Timestamp: time.UnixMilli(ts)})
			n++
		}
		ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
		err := producer.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	outs := kafkatest.ConsumeUntil(t, out, time.Minute, func(rs []*kgo.Record) bool { return len(rs) >= n })
	// Once idle, the last run is covered: every claim has been made.
	hist := frontierHistory(t, appID, func(rs []*kgo.Record) bool {
		v := frontier.NewView()
		for _, r := range rs {
			_ = v.Apply(r.Key, r.Value)
		}
		st, ok := v.Sink(out)
		return ok && st.WatermarkMs >= ts
	})
	v := frontier.NewView()
	claims := 0
	for _, r := range hist {
		if err := v.Apply(r.Key, r.Value); err != nil {
			t.Fatalf("frontier record at %d: %v", r.Offset, err)
		}
		st, ok := v.Sink(out)
		if !ok || st.WatermarkMs == frontier.NoWatermark || len(st.Partitions) == 0 {
			continue
		}
		claims++
		for _, o := range outs {
			if o.Timestamp.UnixMilli() <= st.WatermarkMs && o.Offset >= st.Partitions[0].Offset {
				t.Fatalf("frontier record at %d claims every output stamped at or before %d below offset %d, but the output stamped %d is at offset %d (a later transaction)",
					r.Offset, st.WatermarkMs, st.Partitions[0].Offset, o.Timestamp.UnixMilli(), o.Offset)
			}
		}
	}
	if claims < 20 {
		t.Fatalf("only %d frontier claims in %d records: too few commits to test anything", claims, len(hist))
	}
	t.Logf("%d inputs in runs of %d sharing a millisecond; %d frontier claims, none ahead of the outputs", n, runLen, claims)
}
