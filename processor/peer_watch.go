package processor

import (
	"slices"
	"time"
)

// peerWatchers is how many other instances watch each instance's HTTP
// address (app_peers.go): two, so one watcher that is itself down or
// restarting does not leave a death unnoticed, while a group of n
// instances dials 2n addresses per probe round, not n².
const peerWatchers = 2

// minPeerRefusals is the fewest refused dials in a row that declare an
// instance dead, however short PeerDeadAfter is: one refusal can be a
// listener between Close and a restart's Listen.
const minPeerRefusals = 3

// watchedPeers returns the instances self watches: the next peerWatchers
// instances after self in the sorted ring of instances (self included,
// duplicates ignored). Every instance of the ring is watched by the
// peerWatchers instances before it, when each runs this with the same
// view of the group.
func watchedPeers(self string, instances []string) []string {
	ring := append([]string{self}, instances...)
	slices.Sort(ring)
	ring = slices.Compact(ring)
	i, _ := slices.BinarySearch(ring, self)
	var out []string
	for k := 1; k < len(ring) && len(out) < peerWatchers; k++ {
		out = append(out, ring[(i+k)%len(ring)])
	}
	return out
}

// dialOutcome is what one dial of a peer's HTTP address showed.
type dialOutcome int

const (
	// dialAccepted: something listens there (a paused process's kernel
	// still accepts into the listen backlog, so a stopped or GC-bound
	// instance counts as alive).
	dialAccepted dialOutcome = iota
	// dialRefused: the host answered that nothing listens on the port,
	// the evidence that the instance's process is gone.
	dialRefused
	// dialUnknown: a timeout or any other error; a host that is down or
	// cut off from us looks like this, and so does one that is cut off
	// from us but not from the broker. The session timeout decides those.
	dialUnknown
)

// peerWatch decides, dial by dial, when a watched instance is dead: every
// dial refused for at least deadAfter, and at least minPeerRefusals of
// them. Any other outcome starts over. It is the deterministic core of the
// peer failure detector; app_peers.go does the dialling and the removal.
type peerWatch struct {
	deadAfter time.Duration
	runs      map[string]refusalRun
}

// refusalRun is an instance's current run of refused dials.
type refusalRun struct {
	since time.Time // first refusal of the run
	n     int
}

func newPeerWatch(deadAfter time.Duration) *peerWatch {
	return &peerWatch{deadAfter: deadAfter, runs: map[string]refusalRun{}}
}

// observe records one dial of instance at now and reports whether the
// instance is now to be declared dead, with the run that shows it. After
// it says so the run starts over, so a removal that did not take (the
// instance came back) is retried only after another full run.
func (w *peerWatch) observe(instance string, o dialOutcome, now time.Time) (dead bool, run refusalRun) {
	if o != dialRefused {
		delete(w.runs, instance)
		return false, refusalRun{}
	}
	r, ok := w.runs[instance]
	if !ok {
		r.since = now
	}
	r.n++
	if r.n >= minPeerRefusals && now.Sub(r.since) >= w.deadAfter {
		delete(w.runs, instance)
		return true, r
	}
	w.runs[instance] = r
	return false, r
}

// keepOnly forgets the runs of instances no longer watched.
func (w *peerWatch) keepOnly(watched []string) {
	for id := range w.runs {
		if !slices.Contains(watched, id) {
			delete(w.runs, id)
		}
	}
}
