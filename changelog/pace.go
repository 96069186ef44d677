package changelog

import (
	"context"
	"io"
	"time"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// PaceFunc throttles background state work: restores, standbys catching
// up, snapshot loads. The work calls it after each stretch of work with
// the wall time that stretch took; it returns once the work may go on (a
// throttle sleeps here) or with ctx's error. On a machine where the
// record loop, the broker and a restore share the cores, an unpaced
// restore takes the CPU the other tasks' records need: their staleness
// rises for as long as it runs. Nil: unpaced.
type PaceFunc func(ctx context.Context, busy time.Duration) error

// paceEvery is the shortest stretch of work between two calls of a
// PaceFunc: shorter stretches are added up, so that a throttle sleeps a
// few times a second rather than after every read.
const paceEvery = 10 * time.Millisecond

// pacer times stretches of work for a PaceFunc.
type pacer struct {
	fn    PaceFunc
	start time.Time // of the current stretch
}

func newPacer(fn PaceFunc) *pacer { return &pacer{fn: fn, start: time.Now()} }

// resume starts a new stretch, after a wait that is not work (a fetch).
func (p *pacer) resume() { p.start = time.Now() }

// pace ends the current stretch, if it is long enough, and calls the
// PaceFunc with it.
func (p *pacer) pace(ctx context.Context) error {
	if p.fn == nil {
		return nil
	}
	busy := time.Since(p.start)
	if busy < paceEvery {
		return nil
	}
	err := p.fn(ctx, busy)
	p.start = time.Now()
	return err
}

// pacedReader paces whoever reads through it (Badger's Load of a snapshot
// object): the time between reads is the reader's work.
type pacedReader struct {
	ctx context.Context
	r   io.Reader
	p   *pacer
}

func (r *pacedReader) Read(b []byte) (int, error) {
	if err := r.p.pace(r.ctx); err != nil {
		return 0, err
	}
	return r.r.Read(b)
}

// SleepPacer is the usual PaceFunc: while active() reports other work that
// the CPU should go to first, it sleeps busy × (1−share)/share after each
// stretch, so the paced work takes at most share of the time it runs (of
// one core); otherwise it does not wait. share ≥ 1: never waits.
func SleepPacer(share float64, active func() bool) PaceFunc {
	if share >= 1 {
		return nil
	}
	return func(ctx context.Context, busy time.Duration) error {
		if !active() {
			return nil
		}
		return retry.Sleep(ctx, min(time.Duration(float64(busy)*(1-share)/share), time.Second))
	}
}
