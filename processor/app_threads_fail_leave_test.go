package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestFatalThreadErrorLeavesTheGroup: a stream thread that fails fatally
// stops the App; every thread's static member (group.instance.id) leaves
// the group, the failed thread's too, so its partitions move to the other
// instances at once instead of after the session timeout (60s here).
func TestFatalThreadErrorLeavesTheGroup(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 2} {
		t.Run(map[int]string{1: "one thread", 2: "two threads"}[threads], func(t *testing.T) {
			in, out := kafkatestNewTopic(t, 4), kafkatestNewTopic(t, 4)
			appID := kafkatestName(t, "fail-leave")
			b := topology.NewBuilder(appID)
			b.Stream(in, serde.String(), serde.String()).
				MapValues(func(_ string, v string) string {
					if v == "boom" {
						panic("boom")
					}
					return v
				}).To(out)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()),
				processor.WithThreads(threads), processor.WithInstanceID("x"), sessionTimeout(60*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("ok"), Partition: 0},
				&kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("boom"), Partition: 3})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = app.Run(ctx)
			if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("Run: %v; want it to stop on the failing record", err)
			}
			gs, err := kafkatest.Admin(t).DescribeGroups(context.Background(), appID)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, m := range gs[appID].Members {
				id := m.MemberID
				if m.InstanceID != nil {
					id = *m.InstanceID
				}
				left = append(left, id)
			}
			if len(left) > 0 {
				t.Fatalf("after Run stopped on a fatal error, the group still has members %v (state %s): their partitions wait for the session timeout",
					left, gs[appID].State)
			}
		})
	}
}
