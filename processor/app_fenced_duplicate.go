package processor

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// instanceFenceWindow is how soon after a first fence of the instance a
// second one stops the thread: see session.instanceFenced and
// appThread.fencedAgain.
const instanceFenceWindow = 2 * time.Minute

// instanceFenced is the error a session ends with when the coordinator
// answered FENCED_INSTANCE_ID: its member was replaced by another with
// this thread's instance id, and kgo would retry for ever, leaving a member
// with no partitions that still reported ready.
//
// Usually another process was started with the same instance id, and
// Kafka Streams stops then. But this process can fence itself: after a
// broker stall (a SIGSTOP for 20 s in the soak's broker-pause scenario) the
// coordinator handled a join the thread's previous session sent before
// the stall after its new session's, and the new session was fenced by
// its own predecessor. So the first fence restarts the session (it joins
// again and takes the instance id back); a second within
// instanceFenceWindow stops the thread, as two processes with one instance
// id fence each other in turn.
func (s *session) instanceFenced(err error) error {
	if !s.th.fencedAgain(s.now()) {
		s.app.log.Warn("fenced from the group: another member took this instance id; joining again (a second fence soon after stops the app: instance ids must be unique)",
			"thread", s.th.index, "instance_id", s.app.threadInstance(s.th), "err", err)
		return fmt.Errorf("%w: fenced from the group with instance id %q (%v)", errRestartSession, s.app.threadInstance(s.th), err)
	}
	return fmt.Errorf("processor: %w: %w: another instance joined the group with instance id %q and fenced this one: instance ids must be unique (%v)",
		errFatal, errInstanceTaken, s.app.threadInstance(s.th), err)
}

// fencedAgain records a fence of th's instance (FENCED_INSTANCE_ID, or a
// producer fence while the group lists another member with its instance
// id) and says whether another came within instanceFenceWindow before it.
// The first is not proof of another process: after a broker stall the
// coordinator can drop the member (UNKNOWN_MEMBER_ID) while a peer ends
// its transaction, and the member id the group then lists is the one this
// process's own client rejoined with, which no session synced yet (soak
// TestSoakBrokerPause, seed 8548539256132959243).
func (th *appThread) fencedAgain(now time.Time) bool {
	again := !th.lastInstanceFence.IsZero() && now.Sub(th.lastInstanceFence) <= instanceFenceWindow
	th.lastInstanceFence = now
	return again
}

// takenOverAfterFence is the fatal error for a session whose producer was
// fenced because another process now holds its instance id in the group,
// nil when the group says nothing of the kind (or cannot be described).
//
// A second process started with the same instance id shares the first's
// transactional id: its producer fences the first's, often before the
// broker fences the first's group member. The fenced session would then
// restart and take the member back, stopping the newcomer with
// FENCED_INSTANCE_ID, or the two would take it from each other in turn;
// the process that was replaced stops instead, as it does when its member
// is fenced first. memberID is the member id the session had.
func (a *App) takenOverAfterFence(ctx context.Context, th *appThread, memberID string) error {
	if memberID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g, err := a.describeGroup(ctx)
	if err != nil {
		return nil
	}
	instance := a.threadInstance(th)
	for _, m := range g.Members {
		if m.InstanceID != nil && *m.InstanceID == instance && m.MemberID != memberID && th.replacedBy(m.MemberID) {
			return fmt.Errorf("processor: %w: %w: another process joined the group with instance id %q and took this one's place (member %s, then its producer fenced ours): instance ids must be unique",
				errFatal, errInstanceTaken, instance, m.MemberID)
		}
	}
	return nil
}

// members are the member ids a thread's sessions synced with, in this
// process. A fenced thread is taken over only if it was in the group
// itself and the member holding its instance id now is none of its own:
// a process restarted after a SIGKILL is fenced (a survivor ends the dead
// process's transaction under the same transactional id) before its first
// join replaced the dead process's member, which the group still lists.
type members struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (th *appThread) rememberMember(id string) {
	th.members.mu.Lock()
	defer th.members.mu.Unlock()
	if th.members.ids == nil {
		th.members.ids = map[string]bool{}
	}
	th.members.ids[id] = true
}

// replacedBy says whether the member id the group lists for th's instance
// id belongs to another process: th has been a member in this process, and
// never with that id.
func (th *appThread) replacedBy(id string) bool {
	th.members.mu.Lock()
	defer th.members.mu.Unlock()
	return len(th.members.ids) > 0 && !th.members.ids[id]
}
