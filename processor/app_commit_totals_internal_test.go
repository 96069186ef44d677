package processor

import (
	"testing"

	"github.com/tidemark-streams/tidemark/frontier"
)

// A thread's /frontier commits and aborts are its totals: a new session's
// controller starts counting at zero, the closed sessions' counts are
// added back, by reason too, without changing the earlier snapshot.
func TestCommitTotalsCarryAcrossSessions(t *testing.T) {
	t.Parallel()
	var tot commitTotals
	first := frontier.Snapshot{Commits: 7, Aborts: 2, CommitsBy: map[frontier.Reason]uint64{frontier.ReasonInterval: 5, frontier.ReasonStaleness: 2}}
	tot.add(first)
	second := frontier.Snapshot{Commits: 3, Aborts: 1, CommitsBy: map[frontier.Reason]uint64{frontier.ReasonInterval: 3}}
	got := tot.onto(second)
	if got.Commits != 10 || got.Aborts != 3 {
		t.Fatalf("commits %d aborts %d, want 10 and 3", got.Commits, got.Aborts)
	}
	if got.CommitsBy[frontier.ReasonInterval] != 8 || got.CommitsBy[frontier.ReasonStaleness] != 2 {
		t.Fatalf("by reason %v, want interval 8 staleness 2", got.CommitsBy)
	}
	if second.CommitsBy[frontier.ReasonInterval] != 3 {
		t.Fatalf("onto changed the session's own map: %v", second.CommitsBy)
	}
}
