package processor

import (
	"slices"
	"testing"
	"time"
)

func TestWatchedPeersAreTheNextTwoInTheRing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		self      string
		instances []string
		want      []string
	}{
		{"a", nil, nil},
		{"a", []string{"b"}, []string{"b"}},
		{"a", []string{"a", "b"}, []string{"b"}},
		{"b", []string{"c", "a", "d"}, []string{"c", "d"}},
		{"d", []string{"c", "a", "b"}, []string{"a", "b"}}, // wraps around
		{"c", []string{"a", "b", "d", "e"}, []string{"d", "e"}},
		{"e", []string{"a", "b", "d", "c"}, []string{"a", "b"}},
	} {
		if got := watchedPeers(tc.self, tc.instances); !slices.Equal(got, tc.want) {
			t.Errorf("watchedPeers(%q, %v) = %v, want %v", tc.self, tc.instances, got, tc.want)
		}
	}
	// Every instance of a group is watched by exactly peerWatchers others.
	ring := []string{"i0", "i1", "i2", "i3", "i4", "i5"}
	watchers := map[string]int{}
	for _, self := range ring {
		for _, p := range watchedPeers(self, ring) {
			if p == self {
				t.Fatalf("%s watches itself", self)
			}
			watchers[p]++
		}
	}
	for _, id := range ring {
		if watchers[id] != peerWatchers {
			t.Errorf("%s has %d watchers, want %d", id, watchers[id], peerWatchers)
		}
	}
}

// A peer is dead only after refusals for deadAfter and at least
// minPeerRefusals of them; an accepted dial or an unknown outcome (a
// timeout) starts over, and so does the verdict itself.
func TestPeerWatchNeedsAFullRunOfRefusals(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms   int
		o    dialOutcome
		dead bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"refused for deadAfter", []step{{0, dialRefused, false}, {100, dialRefused, false}, {200, dialRefused, false}, {300, dialRefused, false}, {400, dialRefused, false}, {500, dialRefused, true}}},
		{"too few refusals however long", []step{{0, dialRefused, false}, {600, dialRefused, false}, {1200, dialRefused, true}}},
		{"an accepted dial starts over", []step{{0, dialRefused, false}, {300, dialRefused, false}, {400, dialAccepted, false}, {500, dialRefused, false}, {900, dialRefused, false}, {1000, dialRefused, true}}},
		{"a timeout is no evidence", []step{{0, dialRefused, false}, {200, dialRefused, false}, {400, dialUnknown, false}, {600, dialRefused, false}, {800, dialRefused, false}, {1000, dialRefused, false}, {1100, dialRefused, true}}},
		{"only timeouts: never", []step{{0, dialUnknown, false}, {1000, dialUnknown, false}, {5000, dialUnknown, false}}},
		{"the verdict starts a new run", []step{{0, dialRefused, false}, {250, dialRefused, false}, {500, dialRefused, true}, {600, dialRefused, false}, {700, dialRefused, false}, {1100, dialRefused, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newPeerWatch(500 * time.Millisecond)
			for i, s := range tc.steps {
				if dead, _ := w.observe("p", s.o, at(s.ms)); dead != s.dead {
					t.Fatalf("step %d (%d ms, outcome %d): dead = %v, want %v", i, s.ms, s.o, dead, s.dead)
				}
			}
		})
	}
}

func TestPeerWatchForgetsUnwatchedPeers(t *testing.T) {
	t.Parallel()
	w := newPeerWatch(500 * time.Millisecond)
	t0 := time.Unix(1000, 0)
	w.observe("p", dialRefused, t0)
	w.observe("p", dialRefused, t0.Add(250*time.Millisecond))
	w.keepOnly([]string{"q"}) // p left the watched set: its run is dropped
	if dead, run := w.observe("p", dialRefused, t0.Add(600*time.Millisecond)); dead || run.n != 1 {
		t.Fatalf("after keepOnly: dead = %v, run %+v; want a new run of 1", dead, run)
	}
}

func TestPeerDeadAfterValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {-1, true}, {100 * time.Millisecond, true}, {2 * time.Second, true}, {50 * time.Millisecond, false}} {
		c := Config{Brokers: []string{"b:9092"}, PeerDeadAfter: tc.d}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("PeerDeadAfter %s: Validate() = %v, want ok %v", tc.d, err, tc.ok)
		}
	}
}
