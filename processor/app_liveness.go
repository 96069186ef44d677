package processor

import (
	"fmt"
	"net/http"
	"runtime"
	"time"
)

// A record loop turns at least every 50 ms while it runs, and between
// sessions its thread retries within a few seconds (a capped backoff). A
// thread that stops turning is stuck in a call that never returns: user
// code that deadlocked, or Badger retrying forever to flush a memtable to
// a disk that turned read-only. Nothing inside the process can unstick it,
// and a stuck thread still holds its partitions, heartbeating the group,
// so the group will not move them: the process must be restarted. So
// GET /healthz answers 503 while a thread is stuck (a liveness probe then
// restarts it), tidemark_stuck_threads counts them, and the log gets every
// goroutine's stack once per episode, to show where it hangs.

// DefaultLivenessTimeout is Config.LivenessTimeout's default: far above
// any turn the runtime takes on purpose (a commit waits at most
// TransactionTimeout, a session's backoff at most 5 s), so that only a
// thread that cannot go on is called stuck.
const DefaultLivenessTimeout = 5 * time.Minute

// MinLivenessTimeout is the shortest LivenessTimeout: a loop turns every
// 50 ms when idle, but a commit or a session start takes longer.
const MinLivenessTimeout = time.Second

// WithLivenessTimeout sets Config.LivenessTimeout.
func WithLivenessTimeout(d time.Duration) Option { return func(c *Config) { c.LivenessTimeout = d } }

// livenessCheckEvery is how often the watch looks at the threads.
const livenessCheckEvery = time.Second

// alive records that th's loop turned.
func (th *appThread) alive() { th.turned.Store(time.Now().UnixNano()) }

// stuck returns the stream threads whose loop has not turned within
// LivenessTimeout at now, and how long ago the longest-stuck one did.
func (a *App) stuck(now time.Time) (threads []int, longest time.Duration) {
	if a.cfg.LivenessTimeout <= 0 {
		return nil, 0
	}
	for _, th := range a.threads {
		last := th.turned.Load()
		if last == 0 {
			continue
		}
		if d := now.Sub(time.Unix(0, last)); d > a.cfg.LivenessTimeout {
			threads = append(threads, th.index)
			longest = max(longest, d)
		}
	}
	return threads, longest
}

// serveHealth is GET /healthz.
func (a *App) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if threads, d := a.stuck(time.Now()); len(threads) > 0 {
		http.Error(w, fmt.Sprintf("stuck: stream thread(s) %v have not turned for %s (LivenessTimeout %s); restart the process",
			threads, d.Round(time.Second), a.cfg.LivenessTimeout), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// watchLiveness starts the watch of the threads' loops: it keeps
// tidemark_stuck_threads current and logs each stuck episode once, with
// every goroutine's stack. The returned func stops it and waits.
func (a *App) watchLiveness() (stop func()) {
	if a.cfg.LivenessTimeout <= 0 {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(livenessCheckEvery)
		defer tick.Stop()
		reported := false
		for {
			select {
			case <-done:
				a.metrics.stuckThreads.Set(0)
				return
			case <-tick.C:
			}
			threads, d := a.stuck(time.Now())
			a.metrics.stuckThreads.Set(float64(len(threads)))
			switch {
			case len(threads) > 0 && !reported:
				reported = true
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				a.log.Error("stream thread stuck: its record loop has not turned within LivenessTimeout; GET /healthz answers 503 until it does: restart the process",
					"threads", threads, "since", d.Round(time.Second), "liveness_timeout", a.cfg.LivenessTimeout, "goroutines", string(buf))
			case len(threads) == 0 && reported:
				reported = false
				a.log.Warn("stream threads turn again after being stuck")
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
