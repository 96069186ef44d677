package processor

import (
	"context"
	"fmt"
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
		if m.InstanceID != nil && *m.InstanceID == instance && m.MemberID != memberID {
			return fmt.Errorf("processor: %w: %w: another process joined the group with instance id %q and took this one's place (member %s, then its producer fenced ours): instance ids must be unique",
				errFatal, errInstanceTaken, instance, m.MemberID)
		}
	}
	return nil
}
