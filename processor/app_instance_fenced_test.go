package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// Two processes started with the same instance id: the second takes the
// static member's place, and the first must stop with an error that says
// so, not linger in the group with no partitions while reporting ready
// (it retried the fenced heartbeat for ever).
func TestDuplicateInstanceIDStopsTheFencedInstance(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "dupid")
	topo := countTopology(t, appID, in, out)
	a, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()),
		processor.WithInstanceID("same"), fastCommits)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("1"), Partition: processor.DefaultPartition([]byte("k"), 2)})
	kafkatest.ConsumeUntil(t, out, 30*time.Second, atLeast(1))

	runApp(t, topo, processor.WithInstanceID("same"), fastCommits)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "instance ids must be unique") {
			t.Fatalf("the fenced instance's Run = %v, want an error naming the duplicate instance id", err)
		}
		t.Logf("the fenced instance stopped: %v", err)
	case <-time.After(45 * time.Second):
		t.Fatal("the fenced instance is still running 45s after another took its instance id")
	}
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("2"), Partition: processor.DefaultPartition([]byte("k"), 2)})
	kafkatest.ConsumeUntil(t, out, 30*time.Second, atLeast(2))
}
