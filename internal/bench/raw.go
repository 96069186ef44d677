package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	RegisterWorker("raw", runRaw)
	RegisterWorker("raw-txn", runRawTxn)
}

// rawRecord is the raw limit's "processing": forward the input with the
// same key, partition and timestamp, upper-casing the value like the
// stateless workload does.
func rawRecord(job Job, r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: job.Output, Partition: r.Partition, Key: r.Key,
		Value: bytes.ToUpper(r.Value), Timestamp: r.Timestamp}
}

func rawOpts(job Job, ready func()) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { ready() }),
		kgo.SeedBrokers(job.Brokers...),
		kgo.ConsumerGroup(job.AppID),
		kgo.ConsumeTopics(job.Input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
	}
}

func interval(job Job) time.Duration {
	if job.CommitInterval > 0 {
		return job.CommitInterval
	}
	return 100 * time.Millisecond
}

// runRaw is at-least-once: produce, and every commit interval flush and
// commit the consumed offsets.
func runRaw(ctx context.Context, job Job, ready func()) error {
	cl, err := kgo.NewClient(append(rawOpts(job, ready), kgo.DisableAutoCommit())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	last := time.Now()
	for ctx.Err() == nil {
		// Bounded polls, so the last offsets commit when input stops.
		pctx, cancel := context.WithTimeout(ctx, interval(job))
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fetchErr(fs); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) { cl.Produce(ctx, rawRecord(job, r), nil) })
		if time.Since(last) >= interval(job) {
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			last = time.Now()
		}
	}
	return nil
}

// runRawTxn is exactly-once without state: one transaction per commit
// interval through GroupTransactSession.
func runRawTxn(ctx context.Context, job Job, ready func()) error {
	s, err := kgo.NewGroupTransactSession(append(rawOpts(job, ready), kgo.TransactionalID(job.AppID+"-txn"))...)
	if err != nil {
		return err
	}
	defer s.Close()
	var open bool
	var began time.Time
	for ctx.Err() == nil {
		wait := interval(job)
		if open {
			wait = max(time.Millisecond, wait-time.Since(began)) // poll no later than the commit is due
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := s.PollFetches(pctx)
		cancel()
		if err := fetchErr(fs); err != nil {
			return err
		}
		if !open && !fs.Empty() {
			if err := s.Begin(); err != nil {
				return err
			}
			open, began = true, time.Now()
		}
		fs.EachRecord(func(r *kgo.Record) { s.Produce(ctx, rawRecord(job, r), nil) })
		if open && time.Since(began) >= interval(job) {
			if _, err := s.End(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			open = false
		}
	}
	return nil
}

func fetchErr(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(t string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			first = fmt.Errorf("fetch %s/%d: %w", t, p, err)
		}
	})
	return first
}
