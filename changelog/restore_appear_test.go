package changelog

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/internal/testlog"
)

// TestRestoreWaitsForATopicThatIsStillAppearing: a broker answers
// UNKNOWN_TOPIC_OR_PARTITION for a moment after CreateTopics returned, and
// an application creates its changelog topics just before it restores
// them. The restore must ride that out, not fail with ErrTopicNotFound
// (CI saw it fail so, right after a test recreated a changelog topic).
func TestRestoreWaitsForATopicThatIsStillAppearing(t *testing.T) {
	t.Parallel()
	const topic = "app-s-changelog"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refused.Load() >= 3 {
			return nil, nil, false
		}
		refused.Add(1)
		lreq := req.(*kmsg.ListOffsetsRequest)
		resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lreq.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	var logs testlog.Buffer
	db := openTestDB(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = db.Restore(ctx, []RestoreTarget{{Store: "s", Partition: 0, Topic: topic}}, RestoreOptions{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		Logger:     slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("restore gave up on a topic that was still appearing: %v", err)
	}
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if refused.Load() < 3 {
		t.Fatalf("the broker refused %d ListOffsets, want 3: the test did not test anything", refused.Load())
	}
	if !strings.Contains(logs.String(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("no retry logged for the topic that was appearing; log:\n%s", logs.String())
	}
}
