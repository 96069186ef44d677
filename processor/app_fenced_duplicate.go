package processor

import (
	"context"
	"fmt"
	"sync"
	"time"
)

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
