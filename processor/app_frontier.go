package processor

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
)

// nextFrontier is the frontier this transaction makes visible: every sink
// partition's highest offset, and the watermark the outputs cover.
func (s *session) nextFrontier() map[string]frontier.Frontier {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	out := map[string]frontier.Frontier{}
	for sink, f := range s.frontiers {
		next := frontier.Frontier{Sink: f.Sink, Marks: append([]frontier.Mark(nil), f.Marks...)}
		for p := range next.Marks {
			m := frontier.Mark{Offset: next.Marks[p].Offset, WatermarkMs: s.watermark}
			if off, ok := s.txn.marks[topicPartition{sink, int32(p)}]; ok {
				m.Offset = off + 1
			}
			if s.watermark == frontier.NoWatermark {
				m.WatermarkMs = next.Marks[p].WatermarkMs
			}
			_, _ = next.Advance(int32(p), m)
		}
		out[sink] = next
	}
	return out
}

func (s *session) produceFrontier(ctx context.Context) error {
	topic := s.app.layout.frontier
	if topic == "" {
		return nil
	}
	for sink, f := range s.nextFrontier() {
		v, err := f.MarshalBinary()
		if err != nil {
			return err
		}
		// One record per sink and instance: several instances write to
		// the same sink partitions, and a reader takes, per partition, the
		// minimum watermark over the live instances (compaction keeps each
		// instance's latest).
		r := &kgo.Record{Topic: topic, Partition: 0, Key: FrontierKey(sink, s.app.cfg.InstanceID), Value: v,
			Headers: []kgo.RecordHeader{{Key: "instance", Value: []byte(s.app.cfg.InstanceID)}}}
		if err := s.producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("produce frontier of %s: %w", sink, err)
		}
	}
	return nil
}

// advanceFrontier merges what the committed transaction made visible into
// the session's frontier and publishes it to the HTTP handlers.
func (s *session) advanceFrontier() {
	for sink, f := range s.nextFrontier() {
		_ = s.frontiers[sink].Merge(f)
	}
	s.app.pub.mu.Lock()
	defer s.app.pub.mu.Unlock()
	for sink, f := range s.frontiers {
		s.app.pub.frontiers[sink] = frontier.Frontier{Sink: f.Sink, Marks: append([]frontier.Mark(nil), f.Marks...)}
	}
}

// FrontierKey is the key of an instance's record for sink on the
// "<app>-frontier" topic: "<sink>@<instance>".
func FrontierKey(sink, instance string) []byte { return []byte(sink + "@" + instance) }
