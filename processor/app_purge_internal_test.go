package processor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/txn"
)

// fakePurgeAdmin keeps low watermarks and records every DeleteRecords.
type fakePurgeAdmin struct {
	low     map[string]map[int32]int64
	deletes []kadm.Offsets
	fail    map[int32]error // DeleteRecords' per-partition errors
}

func (f *fakePurgeAdmin) ListStartOffsets(_ context.Context, topics ...string) (kadm.ListedOffsets, error) {
	out := kadm.ListedOffsets{}
	for _, t := range topics {
		out[t] = map[int32]kadm.ListedOffset{}
		for p := range int32(2) { // the topic's partitions
			out[t][p] = kadm.ListedOffset{Topic: t, Partition: p, Offset: f.low[t][p]}
		}
	}
	return out, nil
}

func (f *fakePurgeAdmin) DeleteRecords(_ context.Context, os kadm.Offsets) (kadm.DeleteRecordsResponses, error) {
	f.deletes = append(f.deletes, os)
	out := kadm.DeleteRecordsResponses{}
	os.Each(func(o kadm.Offset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]kadm.DeleteRecordsResponse{}
		}
		if err := f.fail[o.Partition]; err != nil {
			out[o.Topic][o.Partition] = kadm.DeleteRecordsResponse{Topic: o.Topic, Partition: o.Partition, Err: err}
			return
		}
		if f.low[o.Topic] == nil {
			f.low[o.Topic] = map[int32]int64{}
		}
		f.low[o.Topic][o.Partition] = max(f.low[o.Topic][o.Partition], o.At)
		out[o.Topic][o.Partition] = kadm.DeleteRecordsResponse{Topic: o.Topic, Partition: o.Partition, LowWatermark: f.low[o.Topic][o.Partition]}
	})
	return out, nil
}

func TestPurgerDeletesOnlyBelowCommittedOffsets(t *testing.T) {
	t.Parallel()
	const rep = "app-by-sku-repartition"
	var purged int64
	var errs int
	var logs strings.Builder
	p := &purger{
		interval:  time.Second,
		isRepart:  func(topic string) bool { return topic == rep },
		log:       slog.New(slog.NewTextHandler(&logs, nil)),
		purged:    func(n int64) { purged += n },
		failed:    func() { errs++ },
		committed: map[changelog.TopicPartition]int64{},
		done:      map[changelog.TopicPartition]int64{},
	}
	adm := &fakePurgeAdmin{low: map[string]map[int32]int64{}}
	ctx := context.Background()
	deleted := func() map[int32]int64 {
		t.Helper()
		if len(adm.deletes) == 0 {
			return nil
		}
		out := map[int32]int64{}
		adm.deletes[len(adm.deletes)-1].Each(func(o kadm.Offset) {
			if o.Topic != rep {
				t.Fatalf("DeleteRecords on %s, which is not a repartition topic", o.Topic)
			}
			out[o.Partition] = o.At
		})
		adm.deletes = nil
		return out
	}
	expect := func(step string, want map[int32]int64) {
		t.Helper()
		p.purgeOnce(ctx, adm)
		got := deleted()
		if len(got) != len(want) {
			t.Fatalf("%s: DeleteRecords %v, want %v", step, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: DeleteRecords %v, want %v", step, got, want)
			}
		}
	}

	expect("nothing committed yet", nil)
	p.observe(txn.Stats{Committed: true, Offsets: txn.Offsets{rep: {0: 10, 1: 4}, "user-input": {0: 99}}})
	expect("first commit: up to its offsets, user topics untouched", map[int32]int64{0: 10, 1: 4})
	if purged != 14 {
		t.Fatalf("purged-records metric %d, want 14 (low watermarks 0 -> 10 and 0 -> 4)", purged)
	}
	expect("nothing advanced since", nil)

	// An attempt that aborted consumed further; its inputs are read again,
	// so nothing of it may be purged.
	p.observe(txn.Stats{Committed: false, Offsets: txn.Offsets{rep: {0: 50, 1: 40}}})
	expect("after an abort", nil)

	p.observe(txn.Stats{Committed: true, Offsets: txn.Offsets{rep: {1: 7}}})
	expect("only the partition that advanced", map[int32]int64{1: 7})
	if purged != 17 {
		t.Fatalf("purged-records metric %d, want 17", purged)
	}

	// A failed partition is retried at the next purge; the other is done.
	adm.fail = map[int32]error{0: kerr.NotLeaderForPartition}
	p.observe(txn.Stats{Committed: true, Offsets: txn.Offsets{rep: {0: 12, 1: 9}}})
	expect("partition 0 fails", map[int32]int64{0: 12, 1: 9})
	if errs != 1 || !strings.Contains(logs.String(), "NOT_LEADER") {
		t.Fatalf("errors metric %d, log %q: want one error, logged", errs, logs.String())
	}
	adm.fail = nil
	expect("the failed partition again", map[int32]int64{0: 12})
	if purged != 21 {
		t.Fatalf("purged-records metric %d, want 21", purged)
	}

	// Disabled: commits are not even remembered.
	p.interval = -1
	p.observe(txn.Stats{Committed: true, Offsets: txn.Offsets{rep: {0: 100}}})
	p.interval = time.Second
	expect("commits while disabled", nil)
}
