package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

func TestBrokerIsReal(t *testing.T) {
	cl := kafkatest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	versions, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatalf("api versions: %v", err)
	}
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			t.Fatalf("broker %d: %v", v.NodeID, v.Err)
		}
		// kfake answers ApiVersions too; a real 4.x broker names itself in
		// the version guess and supports the KRaft-only DescribeQuorum.
		if guess := v.VersionGuess(); guess == "" {
			t.Fatalf("broker %d: no version guess", v.NodeID)
		}
		t.Logf("broker %d via %s: %s", v.NodeID, kafkatest.Source(), v.VersionGuess())
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	topic := kmsg.NewDescribeQuorumRequestTopic()
	topic.Topic = "__cluster_metadata"
	part := kmsg.NewDescribeQuorumRequestTopicPartition()
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe quorum (a KRaft broker answers it): %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].LeaderID < 0 {
		t.Fatalf("metadata quorum without leader: %+v", resp)
	}
}

func TestCommittedTransactionVisibleAbortedNot(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	producer := kafkatest.Client(t,
		kgo.TransactionalID(kafkatest.UniqueName(t, "txn")),
		kgo.DefaultProduceTopic(topic),
	)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	transact := func(value string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		if err := producer.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", value, err)
		}
		if err := producer.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end %s: %v", value, err)
		}
	}
	transact("aborted-1", kgo.TryAbort)
	transact("committed-1", kgo.TryCommit)
	transact("aborted-2", kgo.TryAbort)
	transact("committed-2", kgo.TryCommit)

	got := kafkatest.ConsumeUntil(t, topic, kafkatest.Timeout, func(rs []*kgo.Record) bool {
		return len(rs) > 0 && string(rs[len(rs)-1].Value) == "committed-2"
	})
	var values []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	if fmt.Sprint(values) != "[committed-1 committed-2]" {
		t.Fatalf("read_committed saw %v, want only the committed records", values)
	}

	// read_uncommitted sees the aborted data: proof that the broker really
	// keeps it and the isolation level is what hides it.
	raw := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	var all int
	for all < 4 {
		fs := raw.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_uncommitted saw %d records, want 4", all)
		}
		all += fs.NumRecords()
	}
}

func TestCompactedTopicDropsOlderValues(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "200",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "100",
		"min.compaction.lag.ms":     "0",
	})
	var recs []*kgo.Record
	for v := range 5 {
		for _, k := range []string{"sku-1", "sku-2"} {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "%s-v%d", k, v)})
		}
	}
	kafkatest.Produce(t, recs...)

	// The active segment is never cleaned: keep appending an unrelated key
	// so segments roll, until a read from the start shows one value per key.
	deadline := time.Now().Add(90 * time.Second)
	for {
		time.Sleep(300 * time.Millisecond)
		kafkatest.Produce(t, &kgo.Record{Topic: topic, Key: []byte("roll"), Value: []byte("x")})
		latest, total := readCompacted(t, topic)
		if latest["sku-1"] != "sku-1-v4" || latest["sku-2"] != "sku-2-v4" {
			t.Fatalf("latest values lost by compaction: %v", latest)
		}
		if total.skus == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic never compacted: still %d sku records after 90s", total.skus)
		}
	}
}

type counts struct{ skus int }

func readCompacted(t *testing.T, topic string) (map[string]string, counts) {
	t.Helper()
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	latest := map[string]string{}
	var c counts
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s to offset %d: %v", topic, end.Offset, ctx.Err())
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "roll" {
				latest[string(r.Key)] = string(r.Value)
				c.skus++
			}
			done = done || r.Offset >= end.Offset-1
		})
		if done {
			cl.Close()
			return latest, c
		}
	}
}

func TestGroupTransactSessionOffsetsReadBackStable(t *testing.T) {
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	group := kafkatest.UniqueName(t, "g")
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)})
	}
	kafkatest.Produce(t, recs...)

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(kafkatest.Brokers(t)...),
		kgo.TransactionalID(kafkatest.UniqueName(t, "txn")),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out),
	)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*kafkatest.Timeout)
	defer cancel()
	consumed := 0
	for consumed < 10 {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 10: %v", consumed, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			consumed++
			sess.Produce(ctx, kgo.SliceRecord(r.Value), func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("end: committed=%v err=%v", committed, err)
		}
	}

	// Read at once, while the last commit's markers may still be on their
	// way (the read waits for them; see kafkatest.Committed).
	offsets := kafkatest.Committed(t, group, in)
	for p := range int32(2) {
		if at, ok := offsets[p]; !ok || at != 5 {
			t.Fatalf("partition %d: committed offset %d (found %v), want 5", p, at, ok)
		}
	}
	kafkatest.ConsumeExactly(t, out, 10, kafkatest.Timeout, time.Second)
}
