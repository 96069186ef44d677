package processor_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// syncBuffer is a log destination safe for the App's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInputTopicRecreatedWhileStopped: a count's input topic deleted and
// recreated while the app is stopped, the new topic holding fewer (2) or
// more (8) records than the old one's committed offset (5). The broker
// deletes the group's offsets with the topic, but the task's state still
// carries the old position (5): every record of the new topic must be
// counted, from its start (auto.offset.reset earliest, as Kafka Streams),
// none skipped as already reflected, and the log must say so.
func TestInputTopicRecreatedWhileStopped(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprintf("%d records in the new topic", n), func(t *testing.T) {
			in, out := kafkatestNewTopic(t, 1), kafkatestNewTopic(t, 1)
			appID := kafkatestName(t, "recreated")
			topo := countTopology(t, appID, in, out)
			dir := t.TempDir()
			var old []*kgo.Record
			for i := range 5 {
				old = append(old, &kgo.Record{Topic: in, Key: []byte("k"), Value: fmt.Appendf(nil, "old-%d", i)})
			}
			kafkatest.Produce(t, old...)
			_, stop := runApp(t, topo, processor.WithStateDir(dir), fastCommits)
			kafkatest.ConsumeUntil(t, out, 30*time.Second, atLeast(5))
			stop()

			adm := kafkatest.Admin(t)
			ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
			defer cancel()
			if _, err := adm.DeleteTopic(ctx, in); err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := adm.CreateTopic(ctx, 1, 1, nil, in); err == nil {
					break
				} else if ctx.Err() != nil {
					t.Fatalf("recreate %s: %v", in, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			var fresh []*kgo.Record
			for i := range n {
				fresh = append(fresh, &kgo.Record{Topic: in, Key: []byte("k"), Value: fmt.Appendf(nil, "new-%d", i)})
			}
			kafkatest.Produce(t, fresh...)

			var logs syncBuffer
			runApp(t, topo, processor.WithStateDir(dir), fastCommits,
				processor.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
			got := kafkatest.ConsumeUntil(t, out, 30*time.Second, atLeast(5+n))
			var news []string
			for _, r := range got[5:] {
				news = append(news, fmt.Sprint(int64(binary.BigEndian.Uint64(r.Value))))
			}
			if len(news) != n {
				t.Errorf("after the recreation: %d outputs %v, want the new topic's %d records", len(news), news, n)
			}
			if !strings.Contains(logs.String(), in) || !strings.Contains(logs.String(), "recreated") {
				t.Errorf("the log does not say that %s was recreated and is read from its start:\n%s", in, logs.String())
			}
		})
	}
}
