package processor

import (
	"math"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
)

func TestIdleTrackerRules(t *testing.T) {
	t.Parallel()
	const tau = 5 * time.Second
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tp := changelog.TopicPartition{Topic: "in", Partition: 0}
	type ev struct {
		at   time.Duration
		pos  *int64 // observePosition
		lso  *int64 // observeEnd, sent at `at`
		idle bool   // expected idle(tp, at) after the event
	}
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		evs  []ev
	}{
		{"an empty partition is idle one timeout after it is assigned", []ev{
			{at: 0, pos: i(-1)},
			{at: 3 * time.Second, lso: i(0)},
			{at: 4999 * time.Millisecond, idle: false},
			{at: 5 * time.Second, idle: true},
		}},
		{"caught up to the end offset, then quiet for the timeout", []ev{
			{at: 0, pos: i(10)},
			{at: 3 * time.Second, lso: i(10)},
			{at: 5 * time.Second, pos: i(10), idle: true},
		}},
		{"a record is activity: the timeout starts over", []ev{
			{at: 0, pos: i(10)},
			{at: 3 * time.Second, lso: i(10)},
			{at: 4 * time.Second, pos: i(11)},
			{at: 6 * time.Second, lso: i(11)},
			{at: 7 * time.Second, lso: i(11)},
			{at: 8 * time.Second, lso: i(11), idle: false},
			{at: 9 * time.Second, idle: true},
		}},
		{"not caught up: a backlog is never idle while the end moves", []ev{
			{at: 0, pos: i(10)},
			{at: 3 * time.Second, lso: i(50)},
			{at: 6 * time.Second, lso: i(60), idle: false},
			{at: 10 * time.Second, lso: i(70), idle: false},
		}},
		{"transaction markers: an end offset that stood still for the timeout", []ev{
			{at: 0, pos: i(10)}, // the last record was 9; a commit marker sits at 10
			{at: 3 * time.Second, lso: i(11)},
			{at: 5 * time.Second, lso: i(11)},
			{at: 7 * time.Second, lso: i(11), idle: false},
			{at: 8 * time.Second, idle: true},
		}},
		{"end offsets that cannot be read: not idle, and the quiet starts over once they can", []ev{
			{at: 0, pos: i(10)},
			{at: 3 * time.Second, lso: i(10)},
			{at: 5 * time.Second, lso: i(10), idle: true},
			{at: 7 * time.Second, idle: true},
			{at: 7501 * time.Millisecond, idle: false}, // the last read is over 2.5 s old: stale
			{at: 20 * time.Second, lso: i(10), idle: false},
			{at: 22 * time.Second, lso: i(10)},
			{at: 24 * time.Second, lso: i(10), idle: false},
			{at: 24999 * time.Millisecond, idle: false},
			{at: 25 * time.Second, idle: true},
		}},
		{"end offsets read before the last record say nothing", []ev{
			{at: 0, pos: i(10)},
			{at: 4 * time.Second, pos: i(12)},
			{at: 3 * time.Second, lso: i(12)}, // sent before the activity
			{at: 10 * time.Second, idle: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := newIdleTracker(tau)
			for n, e := range tt.evs {
				if e.pos != nil {
					it.observePosition(tp, *e.pos, at(e.at))
				}
				if e.lso != nil {
					it.observeEnd(tp, *e.lso, at(e.at))
				}
				if got := it.idle(tp, at(e.at)); got != e.idle {
					t.Fatalf("event %d at %v: idle %v, want %v", n, e.at, got, e.idle)
				}
			}
		})
	}
	t.Run("a non-positive timeout never idles", func(t *testing.T) {
		it := newIdleTracker(-1)
		it.observePosition(tp, 0, t0)
		it.observeEnd(tp, 0, t0)
		if it.idle(tp, t0.Add(time.Hour)) || len(it.wantEnds(t0.Add(time.Hour))) != 0 {
			t.Fatal("idle with a negative timeout")
		}
	})
	t.Run("end offsets are wanted after half a timeout of quiet", func(t *testing.T) {
		it := newIdleTracker(tau)
		it.observePosition(tp, 3, t0)
		if len(it.wantEnds(at(2*time.Second))) != 0 || len(it.wantEnds(at(2500*time.Millisecond))) != 1 {
			t.Fatal("wantEnds does not start at half the timeout")
		}
		it.retain(func(changelog.TopicPartition) bool { return false })
		if len(it.wantEnds(at(time.Hour))) != 0 {
			t.Fatal("retain kept a revoked partition")
		}
	})
}

func TestFollowTarget(t *testing.T) {
	t.Parallel()
	ref := func(p int32) frontier.TaskRef { return frontier.TaskRef{SubTopology: 0, Partition: p} }
	mark := func(p int32, wm int64, idle bool) frontier.TaskMark {
		return frontier.TaskMark{TaskRef: ref(p), WatermarkMs: wm, Idle: idle}
	}
	feeds := []frontier.Feed{{SubTopology: 0, Tasks: 3}}
	tests := []struct {
		name             string
		fresh, published []frontier.TaskMark
		want             int64
		wantOK           bool
	}{
		{"the minimum over the other active tasks", []frontier.TaskMark{mark(1, 500, false)}, []frontier.TaskMark{mark(2, 300, false)}, 300, true},
		{"idle tasks are not followed", []frontier.TaskMark{mark(1, 500, false)}, []frontier.TaskMark{mark(2, 100, true)}, 500, true},
		{"fresh marks win over published ones", []frontier.TaskMark{mark(2, 700, false)}, []frontier.TaskMark{mark(1, 600, false), mark(2, 100, true)}, 600, true},
		{"a task without a mark holds it at nothing", []frontier.TaskMark{mark(1, 500, false)}, nil, math.MinInt64, true},
		{"every other task idle: nothing to follow", []frontier.TaskMark{mark(1, 500, true)}, []frontier.TaskMark{mark(2, 300, true)}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh, published := map[frontier.TaskRef]frontier.TaskMark{}, map[frontier.TaskRef]frontier.TaskMark{}
			for _, m := range tt.fresh {
				fresh[m.TaskRef] = m
			}
			for _, m := range tt.published {
				published[m.TaskRef] = m
			}
			got, ok := followTarget(feeds, ref(0), fresh, published)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Fatalf("followTarget = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
