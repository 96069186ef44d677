package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// progress is a consumer group's committed offsets against the input's end.
type progress struct{ committed, end int64 }

func groupProgress(ctx context.Context, adm *kadm.Client, group, topic string, skip ...int32) (progress, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return progress{}, err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return progress{}, err
	}
	var p progress
	ends.Each(func(o kadm.ListedOffset) {
		if slices.Contains(skip, o.Partition) {
			return
		}
		p.end += o.Offset
		if c, ok := offs.Lookup(topic, o.Partition); ok && c.At > 0 {
			p.committed += c.At
		}
	})
	return p, nil
}

// throughput watches the group until its committed offsets reach the end of
// the pre-produced input and rates the input over the time since ready, the
// moment the system reported it owns its partitions. Timing from ready keeps
// group joins and JVM start-up out of the figure, for every system alike,
// and includes the final commit, which is part of the work.
func throughput(ctx context.Context, adm *kadm.Client, group, topic string, ready time.Time, timeout time.Duration) (float64, error) {
	return throughputExcept(ctx, adm, group, topic, ready, timeout)
}

// throughputExcept is throughput over the partitions of topic other than
// skip.
func throughputExcept(ctx context.Context, adm *kadm.Client, group, topic string, ready time.Time, timeout time.Duration, skip ...int32) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: group %s did not finish %s in %s", group, topic, timeout)
		case <-tick.C:
		}
		p, err := groupProgress(ctx, adm, group, topic, skip...)
		if err != nil {
			continue
		}
		if p.end > 0 && p.committed >= p.end {
			return float64(p.end) / time.Since(ready).Seconds(), nil
		}
	}
}

// Staleness is the distribution of receive time minus output timestamp.
type Staleness struct {
	hist  *hdrhistogram.Histogram
	Count int64
}

func newStaleness() *Staleness {
	return &Staleness{hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

func (s *Staleness) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	_ = s.hist.RecordValue(d.Microseconds())
	s.Count++
}

// Quantile in milliseconds.
func (s *Staleness) Quantile(q float64) float64 {
	return float64(s.hist.ValueAtQuantile(q)) / 1000
}

// watch consumes output read_committed until ctx is done and records the
// staleness of every record stamped at or after from.
func watch(ctx context.Context, brokers []string, topic string, from time.Time) (*Staleness, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond),
		// The output topic was created moments ago: look again soon if the
		// first metadata answer does not have it yet.
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	st := newStaleness()
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Timestamp.Before(from) {
				st.record(now.Sub(r.Timestamp))
			}
		})
		if ctx.Err() != nil {
			return st, nil
		}
	}
}
