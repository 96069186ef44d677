package processor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestRestartWithFewerThreadsRemovesTheFormerThreadMembers SIGKILLs an
// instance running three stream threads ("x-t0".."x-t2") and restarts it
// with one ("x"), the session timeout 60s. The restarted instance removes
// its former thread members from the group, so it runs every task long
// before their sessions would expire, and the counts stay exactly once
// (the transactions the dead threads left open are ended).
func TestRestartWithFewerThreadsRemovesTheFormerThreadMembers(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 3), kafkatestNewTopic(t, 3)
	appID := kafkatestName(t, "shrink")
	topo := countTopology(t, appID, in, out)
	want := produceKeysN(t, in, 0, 1_500, 30, 3)
	a := startChild(t, childEnv(t, appID, in, out, "x", "CHILD_THREADS=3", "CHILD_SESSION_TIMEOUT=60s"))
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(1_500))

	more := produceKeysN(t, in, 1_500, 1_500, 30, 3)
	a.kill()
	restarted := time.Now()
	b, _ := runApp(t, topo, processor.WithInstanceID("x"), processor.WithHTTP("127.0.0.1:0"), sessionTimeout(60*time.Second), fastCommits)
	v := waitTasks(t, b, 20*time.Second, "the restarted instance runs every task (the dead threads' sessions would expire only after 60s)",
		func(v tasksView) bool { return slices.Equal(v.Active, []string{"0_0", "0_1", "0_2"}) })
	t.Logf("restarted instance runs %v %v after the restart", v.Active, time.Since(restarted).Round(time.Millisecond))
	checkCounts(t, out, addCounts(want, more))
}
