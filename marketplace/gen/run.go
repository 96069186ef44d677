package gen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RunOptions bounds and observes a Run.
type RunOptions struct {
	// Config describes the stream, for the package-level Run.
	Config Config
	// Count stops after this many events; 0 means no limit.
	Count uint64
	// Duration stops before the first event scheduled at or after this
	// offset; 0 means no limit.
	Duration time.Duration
	// Progress, if set, is called from Run's goroutine every ProgressEvery
	// (default 1s) while events are sent, and once more at the end with
	// Done set.
	Progress      func(Stats)
	ProgressEvery time.Duration
	// FlushTimeout bounds the final flush of buffered records, which also
	// runs after ctx is cancelled so that a stopped run does not leave
	// records half-sent; default 30s.
	FlushTimeout time.Duration
}

// Stats describes a run so far.
type Stats struct {
	Sent    uint64        // records handed to the client
	Acked   uint64        // records the broker acknowledged
	Failed  uint64        // records that failed (including those cancelled with ctx)
	Elapsed time.Duration // wall time since the run started
	// Behind is how late the last record was handed to the client against
	// its schedule: a run that cannot keep up with its profile shows it here.
	Behind time.Duration
	// Rate is the profile's target rate at the last record's offset.
	Rate float64
	Done bool
}

// Run generates the stream of opts.Config and produces it; see
// (*Generator).Run.
func Run(ctx context.Context, client *kgo.Client, opts RunOptions) (Stats, error) {
	g, err := New(opts.Config)
	if err != nil {
		return Stats{}, err
	}
	return g.Run(ctx, client, opts)
}

// Run produces the generator's stream to Kafka, pacing each record to its
// schedule offset from the moment Run starts (opts.Config is ignored: the
// generator has its own). Records carry the event time as their timestamp.
// After a stall Run catches up at full speed rather than skipping events,
// so the stream stays the seed's stream; Stats.Behind shows the lag.
//
// Run stops at opts.Count or opts.Duration, when ctx is cancelled, or on the
// first produce error, and flushes what it has handed to the client before
// returning. Against an unreachable broker the client retries without end:
// check connectivity first (the CLI pings with a dial timeout).
func (g *Generator) Run(ctx context.Context, client *kgo.Client, opts RunOptions) (Stats, error) {
	if opts.Duration < 0 {
		return Stats{}, fmt.Errorf("gen: run duration is %v, must not be negative", opts.Duration)
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = time.Second
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 30 * time.Second
	}
	var (
		st       Stats
		acked    atomic.Uint64
		failed   atomic.Uint64
		errOnce  sync.Once
		firstErr atomic.Pointer[error]
	)
	// Records are produced under pctx, not ctx: a record handed to the
	// client before ctx was cancelled should still be delivered by the final
	// flush. pctx is cancelled FlushTimeout after ctx, so a stuck broker
	// cannot hold Run (blocked in Produce or Flush) past that.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	stopWatch := context.AfterFunc(ctx, func() { time.AfterFunc(opts.FlushTimeout, pcancel) })
	defer stopWatch()
	promise := func(r *kgo.Record, err error) {
		if err == nil {
			acked.Add(1)
			return
		}
		failed.Add(1)
		if pctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // given up after the flush timeout; the flush reports it
		}
		errOnce.Do(func() {
			e := fmt.Errorf("gen: produce to topic %q: %w", r.Topic, err)
			firstErr.Store(&e)
		})
	}
	start := time.Now()
	snapshot := func(done bool) Stats {
		st.Acked, st.Failed, st.Elapsed, st.Done = acked.Load(), failed.Load(), time.Since(start), done
		return st
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastProgress := start

	var runErr error
loop:
	for {
		if e := firstErr.Load(); e != nil {
			runErr = *e
			break
		}
		if opts.Count > 0 && st.Sent >= opts.Count {
			break
		}
		off := g.NextOffset()
		if opts.Duration > 0 && off >= opts.Duration {
			break
		}
		if d := time.Until(start.Add(off)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				runErr = ctx.Err()
				break loop
			case <-timer.C:
			}
		} else if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		rec, err := g.NextRecord()
		if err != nil {
			runErr = err
			break
		}
		st.Behind = max(0, time.Since(start.Add(off)))
		st.Rate = g.cfg.Profile.RateAt(off)
		client.Produce(pctx, &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}, promise)
		st.Sent++
		if opts.Progress != nil && time.Since(lastProgress) >= opts.ProgressEvery {
			lastProgress = time.Now()
			opts.Progress(snapshot(false))
		}
	}

	fctx, cancel := context.WithTimeout(pctx, opts.FlushTimeout)
	defer cancel()
	if err := client.Flush(fctx); err != nil && runErr == nil {
		runErr = fmt.Errorf("gen: flush %d buffered records: %w", st.Sent-acked.Load()-failed.Load(), err)
	}
	if e := firstErr.Load(); e != nil && runErr == nil {
		runErr = *e
	}
	final := snapshot(true)
	if opts.Progress != nil {
		opts.Progress(final)
	}
	return final, runErr
}
