package changelog

import (
	"context"
	"io"
	"sync"
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

// pacedReader paces whoever reads through it (the load of a snapshot
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

// pacedWriter paces whoever writes through it (the Badger Stream of a
// snapshot's backup): the time between writes is the writer's work. The
// stream's reading goroutine runs at most its channel's few batches ahead,
// so pacing the writes paces it too.
type pacedWriter struct {
	ctx context.Context
	w   io.Writer
	p   *pacer
}

func (w *pacedWriter) Write(b []byte) (int, error) {
	if err := w.p.pace(w.ctx); err != nil {
		return 0, err
	}
	return w.w.Write(b)
}

// SleepPacer is the usual PaceFunc: while active() reports other work that
// the CPU should go to first, the work it paces takes at most share of the
// time (of one core), and otherwise it does not wait. share ≥ 1: never
// waits.
//
// One SleepPacer shared by several workers (every restore, standby,
// snapshot load and snapshot write of an App) divides the share among them: it keeps one
// budget of work time that grows by share per second of wall time, every
// call spends the stretch it reports, and a call that leaves the budget in
// debt sleeps until share has paid it back. One worker alone sleeps
// busy × (1−share)/share after each stretch; two at once, each about twice
// that. Why: a moved task's partitions restore in parallel, one worker
// each, and on the 2-core machine of `bench --failover` two snapshot loads
// each paced to half a core took the whole core the broker and the record
// loop needed.
func SleepPacer(share float64, active func() bool) PaceFunc {
	if share >= 1 {
		return nil
	}
	b := &paceBudget{share: share}
	return func(ctx context.Context, busy time.Duration) error {
		if !active() {
			b.reset()
			return nil
		}
		if d := b.spend(time.Now(), busy); d > 0 {
			return retry.Sleep(ctx, d)
		}
		return nil
	}
}

// paceBudgetBurst is the most idle time a SleepPacer's budget banks, as
// work time: after a pause, one stretch of about this much goes unpaced.
const paceBudgetBurst = paceEvery

// paceBudget is SleepPacer's shared budget of work time.
type paceBudget struct {
	mu     sync.Mutex
	share  float64
	credit time.Duration // work allowed now; negative: owed
	last   time.Time     // when credit was last brought up to date; zero: never
}

// reset forgets the budget: with nothing else running the work went
// unpaced, and the time it took is no one's loss.
func (b *paceBudget) reset() {
	b.mu.Lock()
	b.credit, b.last = 0, time.Time{}
	b.mu.Unlock()
}

// spend takes a stretch of busy, which ended at now, out of the budget and
// returns how long the caller sleeps to pay what the budget owes (at most
// a second).
func (b *paceBudget) spend(now time.Time, busy time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.last = now.Add(-busy)
	}
	if now.After(b.last) {
		// The budget grows by share of the wall time, for all workers
		// together; it banks at most a burst beyond what this stretch
		// earned while it ran.
		limit := max(paceBudgetBurst, time.Duration(float64(busy)*b.share))
		b.credit = min(limit, b.credit+time.Duration(float64(now.Sub(b.last))*b.share))
		b.last = now
	}
	b.credit -= busy
	if b.credit >= 0 {
		return 0
	}
	return min(time.Duration(float64(-b.credit)/b.share), time.Second)
}
