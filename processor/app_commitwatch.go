package processor

import (
	"log/slog"
	"time"
)

// commitWatch flags commits whose phases take far longer than usual: a
// flush stuck on a produce retry, an EndTxn waiting on a slow coordinator.
// The frontier controller only sees total latency and adapts to it; an
// operator wants to know that a commit of ~20 ms suddenly took seconds,
// and in which phase. A phase is slow when it exceeds both slowFloor and
// slowFactor times its running mean; a warning goes out at most every
// slowLogEvery, with the phases of the slowest commit since the last one.
type commitWatch struct {
	mean    [3]float64 // flush, end, apply: EWMA in seconds
	seen    int
	lastLog time.Time
	pending *slowCommit
}

type slowCommit struct {
	phases [3]time.Duration
	means  [3]time.Duration
	reason string
	count  int
}

const (
	slowFloor    = 500 * time.Millisecond
	slowFactor   = 10
	slowLogEvery = 10 * time.Second
)

var phaseNames = [3]string{"flush", "end", "apply"}

// observe records one commit's phases and logs a warning when one was slow.
func (w *commitWatch) observe(now time.Time, log *slog.Logger, reason string, phases [3]time.Duration) {
	slow := false
	for i, d := range phases {
		if w.seen >= 5 && d > slowFloor && d.Seconds() > slowFactor*w.mean[i] {
			slow = true
		}
	}
	if slow {
		if w.pending == nil {
			w.pending = &slowCommit{}
		}
		w.pending.count++
		if sum(phases) > sum(w.pending.phases) {
			w.pending.phases, w.pending.reason = phases, reason
			for i := range w.mean {
				w.pending.means[i] = time.Duration(w.mean[i] * float64(time.Second))
			}
		}
	}
	if w.pending != nil && now.Sub(w.lastLog) >= slowLogEvery {
		p := w.pending
		log.Warn("slow commit", "slow_commits", p.count, "trigger", p.reason,
			phaseNames[0], p.phases[0].Round(time.Millisecond), phaseNames[1], p.phases[1].Round(time.Millisecond),
			phaseNames[2], p.phases[2].Round(time.Millisecond),
			"usual_flush", p.means[0].Round(time.Millisecond), "usual_end", p.means[1].Round(time.Millisecond),
			"hint", "a slow flush usually waited on produce retries (tidemark_produce_retries_total); a slow end on the transaction coordinator")
		w.pending, w.lastLog = nil, now
	}
	// Slow samples move the mean little: one 5 s stall must not make the
	// next one look normal.
	for i, d := range phases {
		v := d.Seconds()
		switch {
		case w.seen == 0:
			w.mean[i] = v
		case slow:
			w.mean[i] += (v - w.mean[i]) / 64
		default:
			w.mean[i] += (v - w.mean[i]) / 8
		}
	}
	w.seen++
}

func sum(ds [3]time.Duration) time.Duration { return ds[0] + ds[1] + ds[2] }
