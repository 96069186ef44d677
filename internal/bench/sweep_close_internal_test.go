package bench

import (
	"fmt"
	"testing"
	"time"
)

// TestAppClosesPicksTheCloseBehindAFinal: the in-app origin of a final's
// close→visible is the last close of its window reported before the final
// was received, so after a SIGKILL the restarted worker's close counts for
// the finals it committed, and a final received before any close (a
// report lost) has none.
func TestAppClosesPicksTheCloseBehindAFinal(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	first, again := base.Add(10*time.Millisecond), base.Add(900*time.Millisecond)
	var l eventLog
	l.add(fmt.Sprintf("%s 2 7000 %d", sweepCloseLine, again.UnixNano())) // the restarted worker's, logged second
	l.add("COMMITS 10 4.5")
	l.add(fmt.Sprintf("%s 2 7000 %d", sweepCloseLine, first.UnixNano()))
	l.add(fmt.Sprintf("%s 3 7000 %d", sweepCloseLine, first.UnixNano()))
	l.add("CLOSED 2 garbage 1")
	closes := appCloses{}
	l.closeMoments(closes)
	k := windowClose{part: 2, endMs: 7000}
	for _, c := range []struct {
		recv time.Time
		want time.Time
		ok   bool
	}{
		{base, time.Time{}, false},
		{first.Add(5 * time.Millisecond), first, true},
		{again, again, true},
		{again.Add(time.Second), again, true},
	} {
		got, ok := closes.at(k, c.recv)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("at(%v) = %v, %v; want %v, %v", c.recv.Sub(base), got.Sub(base), ok, c.want.Sub(base), c.ok)
		}
	}
	if _, ok := closes.at(windowClose{part: 1, endMs: 7000}, again); ok {
		t.Errorf("a partition that reported no close has one")
	}
}
