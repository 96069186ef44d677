package processor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/txn"
)

// A change of assignment needs two round trips to the brokers before its
// new tasks can open: ending the open transactions of departed members
// (their records hold back read_committed fetches and restores, and the
// committed offsets of the partitions they had) and reading the committed
// offsets' metadata, the new tasks' clocks. On the record loop they held
// every task that stayed for ~30 ms on the test broker, every time a
// partition moved (most of the survivor's second-worst second in a
// failover). They run on a goroutine of their own now; the new tasks'
// restore goroutines wait for it, the loop does not.

// taskPrep is one assignment change's preparation. resume and err are
// written before done closes.
type taskPrep struct {
	done   chan struct{}
	resume map[changelog.TopicPartition]string
	err    error
}

// prepRunner owns the session's preparation goroutines: close cancels
// and waits for them.
type prepRunner struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// prepareTasks fences departed members and, when parts is not empty,
// reads the committed metadata of parts, on a new goroutine.
func (s *session) prepareTasks(ctx context.Context, parts txn.Partitions) *taskPrep {
	p := &taskPrep{done: make(chan struct{})}
	s.prep.mu.Lock()
	if s.prep.ctx == nil {
		s.prep.ctx, s.prep.cancel = context.WithCancel(ctx)
	}
	pctx := s.prep.ctx
	s.prep.wg.Add(1)
	s.prep.mu.Unlock()
	go func() {
		defer s.prep.wg.Done()
		defer close(p.done)
		start := time.Now()
		if err := s.fenceDeparted(pctx); err != nil {
			s.app.log.Warn("could not check for transactions of departed members", "err", err)
		}
		fenced := time.Now()
		if len(parts) > 0 {
			p.resume, p.err = s.committedMetadata(pctx, parts)
			if p.err != nil {
				p.err = fmt.Errorf("processor: resume task clocks: %w", p.err)
			}
		}
		s.app.log.Debug("tasks prepared", "fence", fenced.Sub(start).Round(time.Millisecond),
			"offsets", time.Since(fenced).Round(time.Millisecond))
	}()
	return p
}

// wait blocks until p is done or ctx ends.
func (p *taskPrep) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopPreps cancels the session's preparations and waits for them.
func (s *session) stopPreps() {
	s.prep.mu.Lock()
	if s.prep.cancel != nil {
		s.prep.cancel()
	}
	s.prep.mu.Unlock()
	s.prep.wg.Wait()
}
