package processor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/txn"
)

// purgeAdmin is what the purger needs of kadm.Client; tests substitute a
// fake.
type purgeAdmin interface {
	ListStartOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error)
	DeleteRecords(ctx context.Context, os kadm.Offsets) (kadm.DeleteRecordsResponses, error)
}

// purger deletes the records of repartition topics below the offsets
// committed transactions consumed them to, as Kafka Streams does every
// repartition.purge.interval.ms: repartition topics keep retention.ms=-1,
// so purging is what bounds them. Only offsets of committed transactions
// count: an aborted transaction's inputs are read again, so they must stay.
//
// The record loop hands it each commit's offsets (observe, which never
// blocks on the network); a goroutine of the App (run) issues DeleteRecords
// at most every interval, one request at a time. It outlives sessions: an
// offset committed by an earlier session stays committed.
type purger struct {
	interval time.Duration // < 0: disabled
	isRepart func(topic string) bool
	log      *slog.Logger
	purged   func(records int64) // the purged-records metric
	failed   func()              // the purge-errors metric

	mu        sync.Mutex
	committed map[changelog.TopicPartition]int64 // latest committed offset
	done      map[changelog.TopicPartition]int64 // offset last purged up to

	lastLog    time.Time // errors are logged at most once a minute
	suppressed int
}

func newPurger(a *App) *purger {
	return &purger{
		interval:  a.cfg.RepartitionPurgeInterval,
		isRepart:  a.topo.IsRepartitionTopic,
		log:       a.log,
		purged:    func(n int64) { a.metrics.repartitionPurged.Add(float64(n)) },
		failed:    func() { a.metrics.repartitionPurgeErrors.Inc() },
		committed: map[changelog.TopicPartition]int64{},
		done:      map[changelog.TopicPartition]int64{},
	}
}

// observe remembers the repartition-topic offsets of a finished commit
// attempt. An attempt that did not commit changes nothing.
func (p *purger) observe(st txn.Stats) {
	if p == nil || p.interval < 0 || !st.Committed {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for topic, ps := range st.Offsets {
		if !p.isRepart(topic) {
			continue
		}
		for part, off := range ps {
			p.committed[changelog.TopicPartition{Topic: topic, Partition: part}] = off
		}
	}
}

// due lists the partitions whose committed offset advanced since they were
// last purged, with that offset.
func (p *purger) due() kadm.Offsets {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := kadm.Offsets{}
	for tp, off := range p.committed {
		if off > p.done[tp] {
			out.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: off, LeaderEpoch: -1})
		}
	}
	return out
}

func (p *purger) markDone(topic string, partition int32, off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := changelog.TopicPartition{Topic: topic, Partition: partition}
	p.done[tp] = max(p.done[tp], off)
}

// run purges every interval until ctx is done (Run's shutdown).
func (p *purger) run(ctx context.Context, adm purgeAdmin) {
	if p.interval < 0 {
		return
	}
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p.purgeOnce(rctx, adm)
		cancel()
	}
}

// purgeOnce deletes the records below the committed offsets that advanced
// since the last purge. A failure is counted and logged (rate-limited);
// the next interval tries again.
func (p *purger) purgeOnce(ctx context.Context, adm purgeAdmin) {
	want := p.due()
	if len(want) == 0 {
		return
	}
	// The low watermarks before, so the metric counts what this purge
	// deleted.
	before, err := adm.ListStartOffsets(ctx, want.TopicsSet().Topics()...)
	if err == nil {
		err = before.Error()
	}
	if err != nil {
		p.fail(ctx, fmt.Errorf("list start offsets: %w", err))
		return
	}
	resp, err := adm.DeleteRecords(ctx, want)
	if err != nil {
		p.fail(ctx, err)
		return
	}
	var deleted int64
	var firstErr error
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err)
			}
			continue
		}
		o, _ := want.Lookup(r.Topic, r.Partition)
		p.markDone(r.Topic, r.Partition, o.At)
		if b, ok := before.Lookup(r.Topic, r.Partition); ok && b.Err == nil && r.LowWatermark > b.Offset {
			deleted += r.LowWatermark - b.Offset
		}
	}
	if deleted > 0 {
		p.purged(deleted)
	}
	if firstErr != nil {
		p.fail(ctx, firstErr)
	}
}

func (p *purger) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // shutting down
	}
	p.failed()
	now := time.Now()
	if now.Sub(p.lastLog) < time.Minute {
		p.suppressed++
		return
	}
	p.log.Warn("purge repartition topics: retrying at the next interval", "err", err, "interval", p.interval, "suppressed_since_last_log", p.suppressed)
	p.lastLog, p.suppressed = now, 0
}
