package processor

import "github.com/tidemark-streams/tidemark/frontier"

// commitTotals carries a thread's commit and abort counts across its
// sessions. Each session has a controller of its own, whose counts start
// at zero: /frontier's commits and aborts dropped to zero after every
// fenced producer or broker outage, when an operator reads them as the
// thread's totals. Loop goroutine only.
type commitTotals struct {
	commits, aborts uint64
	by              map[frontier.Reason]uint64
}

// add folds a closing session's controller counts in.
func (t *commitTotals) add(snap frontier.Snapshot) {
	t.commits += snap.Commits
	t.aborts += snap.Aborts
	for r, n := range snap.CommitsBy {
		if t.by == nil {
			t.by = map[frontier.Reason]uint64{}
		}
		t.by[r] += n
	}
}

// onto returns snap with the earlier sessions' counts added.
func (t *commitTotals) onto(snap frontier.Snapshot) frontier.Snapshot {
	snap.Commits += t.commits
	snap.Aborts += t.aborts
	if len(t.by) > 0 {
		by := make(map[frontier.Reason]uint64, len(snap.CommitsBy)+len(t.by))
		for r, n := range snap.CommitsBy {
			by[r] = n
		}
		for r, n := range t.by {
			by[r] += n
		}
		snap.CommitsBy = by
	}
	return snap
}
