package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// eventTime is a fixed, reproducible event time of the kind tests stamp
// their records with (2023-11-14): older than any default retention.
var eventTime = time.UnixMilli(1_700_000_000_000)

// weekMs is the broker's default retention.ms (seven days).
const weekMs = "604800000"

// TestNewTopicKeepsRecordsOfAnyAge: test topics keep their records whatever
// their timestamps (retention.ms=-1), and a caller's own retention.ms wins.
// Before, they had the broker's seven days, and the broker's retention
// check (every 30 s) deleted records stamped with a test's fixed event time
// mid-test: the real-broker DSL tests failed in about one run in ten,
// inputs or outputs missing, with no error anywhere.
func TestNewTopicKeepsRecordsOfAnyAge(t *testing.T) {
	kept := kafkatest.NewTopic(t, 1, nil)
	own := kafkatest.NewTopic(t, 1, map[string]string{"retention.ms": weekMs})
	want := map[string]string{kept: "-1", own: weekMs}
	for topic, v := range retentionMs(t, kafkatest.Admin(t), kept, own) {
		if v != want[topic] {
			t.Errorf("%s: retention.ms %s, want %s", topic, v, want[topic])
		}
	}
}

// TestNewTopicRecordsSurviveRetentionCheck runs the broker's retention check
// every 250 ms over records stamped with a fixed old event time: the check
// deletes them from a topic with the broker's default retention (the
// control, which shows a check ran), and a topic of NewTopic keeps them.
func TestNewTopicRecordsSurviveRetentionCheck(t *testing.T) {
	p := kafkatest.PrivateBrokerWith(t, map[string]string{
		"log.retention.check.interval.ms": "250",
		"log.initial.task.delay.ms":       "0", // the first check waits 30 s otherwise
	})
	kept := p.NewTopic(2, nil)
	control := p.NewTopic(2, map[string]string{"retention.ms": weekMs})
	const perPartition = 10
	var recs []*kgo.Record
	for _, topic := range []string{kept, control} {
		for part := range int32(2) {
			for i := range perPartition {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Value: []byte("v"),
					Timestamp: eventTime.Add(time.Duration(i) * time.Millisecond)})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*kafkatest.Timeout)
	defer cancel()
	cl := p.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	adm := kadm.NewClient(cl)

	// Wait for a retention check to empty the control.
	deadline := time.Now().Add(30 * time.Second)
	for {
		starts := startOffsets(t, ctx, adm, control)
		if starts[0] == perPartition && starts[1] == perPartition {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retention check did not delete the control topic's old records within 30 s: start offsets %v", starts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a few more checks
	if starts := startOffsets(t, ctx, adm, kept); starts[0] != 0 || starts[1] != 0 {
		t.Fatalf("NewTopic's topic lost records to the retention check: start offsets %v, want 0 (retention.ms %s)",
			starts, retentionMs(t, adm, kept)[kept])
	}
}

func startOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	so, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = so.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	so.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func retentionMs(t *testing.T, adm *kadm.Client, topics ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		t.Fatalf("describe configs of %v: %v", topics, err)
	}
	out := map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("describe configs of %s: %v", rc.Name, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				out[rc.Name] = c.MaybeValue()
			}
		}
	}
	return out
}
