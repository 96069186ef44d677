package processor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// A session fenced while another process holds its instance id in the
// group stops the app (instance ids must be unique) instead of restarting
// and taking the member back from the newcomer; fenced while the group
// still has its own member, it restarts as before.
func TestFencedSessionStopsWhenAnotherProcessTookItsInstanceID(t *testing.T) {
	t.Parallel()
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

// A first FENCED_INSTANCE_ID restarts the session: after a broker stall
// the coordinator can handle the join this thread's previous session sent
// before the stall after its new session's, fencing the new session with
// its own predecessor (soak seed 508369033939792305, broker-pause: the
// instance stopped as "taken by another process" with no other process).
// A second fence within instanceFenceWindow stops it; one after the
// window restarts again.
func TestAFirstInstanceFenceRestartsTheSession(t *testing.T) {
	t.Parallel()
	app := &App{log: slog.New(slog.DiscardHandler), cfg: Config{InstanceID: "i2"}}
	th := &appThread{app: app}
	app.threads = []*appThread{th}
	now := time.Unix(1_700_000_000, 0)
	s := &session{app: app, th: th, now: func() time.Time { return now }}
	fenced := kerr.FencedInstanceID
	for i, c := range []struct {
		after   time.Duration
		restart bool
	}{
		{0, true},
		{30 * time.Second, false},
		{instanceFenceWindow + time.Second, true},
		{time.Second, false},
	} {
		now = now.Add(c.after)
		err := s.instanceFenced(fenced)
		if cause, restart := restartCause(err); restart != c.restart {
			t.Fatalf("fence %d (+%v): %v (cause %q, restart %v), want restart %v", i+1, c.after, err, cause, restart, c.restart)
		}
		if !c.restart && !errors.Is(err, errInstanceTaken) {
			t.Fatalf("fence %d: %v, want errInstanceTaken", i+1, err)
		}
	}
}
