package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// removeFormerThreads removes from the group the static members that a
// former run of this instance, with another thread count, left behind:
// "<instance>-t<k>" that this run does not use, and the bare instance id
// when this run has several threads. Nothing rejoins with those ids, so
// without the removal their partitions would wait for their session
// timeout, and their open transactions would outlive it too (fenceDeparted
// spares group members). Each is named by member id, so a member that
// rejoined meanwhile is not removed. Transient errors (a broker that has
// just started answers COORDINATOR_NOT_AVAILABLE while it creates its
// offsets topic) are retried for up to formerThreadsWait; other errors are
// logged: the session timeout remains.
func (a *App) removeFormerThreads(appCtx context.Context) {
	ctx, cancel := context.WithTimeout(appCtx, formerThreadsWait)
	defer cancel()
	var g kadm.DescribedGroup
	err := retry.Do(ctx, nil, "describe group", func(ctx context.Context) (err error) {
		g, err = a.describeGroup(ctx)
		return err
	})
	if err != nil {
		if appCtx.Err() != nil || errors.Is(err, kerr.GroupIDNotFound) {
			return // shut down, or a new group: no former members
		}
		a.log.Warn("could not look for the former stream threads of this instance in the group", "err", err)
		return
	}
	current := map[string]bool{}
	for _, id := range a.threadInstances() {
		current[id] = true
	}
	var members []kmsg.LeaveGroupRequestMember
	for _, m := range g.Members {
		if m.InstanceID == nil || current[*m.InstanceID] || !isThreadInstanceOf(a.cfg.InstanceID, *m.InstanceID) {
			continue
		}
		// A rebalancing group is described without join metadata; with
		// it, a member of another instance whose id merely looks like a
		// thread of this one is left alone.
		if info, ok := memberInfoOf(m); ok && info.Instance != a.cfg.InstanceID {
			continue
		}
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		members = append(members, rm)
	}
	reason := fmt.Sprintf("tidemark: instance %s restarted with %d stream threads", a.cfg.InstanceID, len(a.threads))
	var removed int
	err = retry.Do(ctx, nil, "remove former stream threads", func(ctx context.Context) (err error) {
		removed, err = a.leaveMembers(ctx, g.Group, a.cfg.InstanceID, members, reason)
		return err
	})
	if err != nil {
		a.log.Warn("could not remove the former stream threads of this instance from the group; their session timeout will", "err", err)
	}
	if removed > 0 {
		a.log.Info("removed the former stream threads of this instance from the group", "members", removed, "threads", len(a.threads))
	}
}

// formerThreadsWait bounds removeFormerThreads, retries included: Run
// waits for it before it joins the group.
const formerThreadsWait = 10 * time.Second

// isThreadInstanceOf reports whether id is a group instance id some thread
// count gives a thread of instance (threadInstanceID).
func isThreadInstanceOf(instance, id string) bool {
	if id == instance {
		return true
	}
	k, ok := strings.CutPrefix(id, instance+"-t")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(k)
	return err == nil && i >= 0 && i < maxThreads && strconv.Itoa(i) == k
}
