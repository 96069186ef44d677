package processor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// A session fenced while another process holds its instance id in the
// group stops the app (instance ids must be unique) instead of restarting
// and taking the member back from the newcomer; fenced while the group
// still has its own member, it restarts as before.
func TestFencedSessionStopsWhenAnotherProcessTookItsInstanceID(t *testing.T) {
	a, group, topic := groupTestApp(t, "dupfence", WithInstanceID("same"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	join := func() *kgo.Client {
		return kafkatest.Client(t, kgo.ConsumerGroup(group), kgo.InstanceID("same"), kgo.ConsumeTopics(topic),
			kgo.SessionTimeout(60*time.Second))
	}
	memberOf := func(cl *kgo.Client) string {
		t.Helper()
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			cl.PollRecords(pctx, 1) // joins
			pcancel()
			if id, gen := cl.GroupMetadata(); id != "" && gen > 0 {
				return id
			}
		}
		t.Fatal("never joined")
		return ""
	}
	first := join()
	mine := memberOf(first)
	th := a.threads[0]
	th.rememberMember(mine) // the session's sync (onSync)
	if err := a.takenOverAfterFence(ctx, th, mine); err != nil {
		t.Fatalf("the group still has this session's own member: %v, want a restart (nil)", err)
	}
	first.Close()    // the fenced session closes its client (a static member does not leave)
	second := join() // another process with the same instance id replaces the member
	if other := memberOf(second); other == mine {
		t.Fatalf("the second client has the first's member id %s", mine)
	}
	// A process restarted after a SIGKILL, fenced before its first join
	// replaced the dead process's member, has never been a member: the
	// member the group lists is the dead one's, not a newcomer's.
	if err := a.takenOverAfterFence(ctx, &appThread{app: a, index: 0}, "restarted-member"); err != nil {
		t.Fatalf("a thread that never synced is stopped as taken over: %v", err)
	}
	err := a.takenOverAfterFence(ctx, th, mine)
	if err == nil || !strings.Contains(err.Error(), "instance ids must be unique") {
		t.Fatalf("after another process took instance id same: %v, want a fatal error saying instance ids must be unique", err)
	}
}
