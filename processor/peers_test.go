package processor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestPeerDetectorMovesADeadInstancesPartitionsBeforeItsSessionTimesOut
// runs instance A (a child process) and instance B, both serving HTTP,
// with a 60s session timeout. A owns both tasks when it is SIGKILLed with
// input arriving; B's peer detector finds A's HTTP port refusing
// connections, removes A's member from the group and rejoins, so B runs
// both tasks long before A's session would have expired. Counts stay
// exactly once (B ends the transaction A left open).
func TestPeerDetectorMovesADeadInstancesPartitionsBeforeItsSessionTimesOut(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	appID := kafkatestName(t, "peers")
	topo := countTopology(t, appID, in, out)
	want := produceKeysN(t, in, 0, 2_000, 50, 2)
	a := startChild(t, childEnv(t, appID, in, out, "a", "CHILD_HTTP=127.0.0.1:0", "CHILD_SESSION_TIMEOUT=60s"))
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(2_000))

	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"), sessionTimeout(60*time.Second), fastCommits)
	// B joins as a newcomer without state: A keeps both active tasks.
	waitTasks(t, b, 45*time.Second, "B joined the group", func(v tasksView) bool { return len(v.Standby) > 0 || len(v.Active) > 0 })
	if v := getTasks(t, b); len(v.Active) == 2 {
		t.Fatalf("B runs both tasks while A is alive: %+v", v)
	}
	// B's detector learns A's address from a describe of the group once
	// it is stable (a rebalancing group's describe leaves it out).
	deadline := time.Now().Add(45 * time.Second)
	for {
		var p peersView
		getJSON(t, "http://"+b.HTTPAddr()+"/peers", &p)
		if len(p.Watching) == 1 && p.Watching[0].Instance == "a" && p.Watching[0].HTTP != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's /peers does not watch A within 45s: %+v", p)
		}
		time.Sleep(200 * time.Millisecond)
	}

	more := produceKeysN(t, in, 2_000, 2_000, 50, 2)
	a.kill()
	killed := time.Now()
	v := waitTasks(t, b, 20*time.Second, "B took A's tasks over (A's session would expire only after 60s)", func(v tasksView) bool {
		return slices.Equal(v.Active, []string{"0_0", "0_1"})
	})
	t.Logf("B runs %v %v after A was killed (session timeout 60s)", v.Active, time.Since(killed).Round(time.Millisecond))
	checkCounts(t, out, addCounts(want, more))
	var p peersView
	getJSON(t, "http://"+b.HTTPAddr()+"/peers", &p)
	if len(p.Removals) != 1 || p.Removals[0].Instance != "a" || p.Removals[0].Members != 1 {
		t.Fatalf("B's /peers removals = %+v, want A's one member", p.Removals)
	}
}

type peersView struct {
	Enabled  bool `json:"enabled"`
	Watching []struct {
		Instance string `json:"instance"`
		HTTP     string `json:"http"`
		Refused  int    `json:"refused"`
	} `json:"watching"`
	Removals []struct {
		Instance string `json:"instance"`
		Members  int    `json:"members"`
	} `json:"removals"`
}

// TestPeerDetectorRemovesADeadInstanceForItsReplacement: instance A (a
// child process serving HTTP, 60s session timeout) runs both tasks and is
// SIGKILLed; only then does B, a replacement with a new instance id (a
// fresh state directory), start. No live instance watched A when it died,
// and once B has joined, the group is rebalancing and describes A without
// the HTTP address A joined with: B must learn it before it joins, or it
// waits out A's session. B runs both tasks long before that, and counts
// stay exactly once.
func TestPeerDetectorRemovesADeadInstanceForItsReplacement(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	appID := kafkatestName(t, "peers")
	topo := countTopology(t, appID, in, out)
	want := produceKeysN(t, in, 0, 2_000, 50, 2)
	a := startChild(t, childEnv(t, appID, in, out, "a", "CHILD_HTTP=127.0.0.1:0", "CHILD_SESSION_TIMEOUT=60s"))
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(2_000))
	more := produceKeysN(t, in, 2_000, 2_000, 50, 2)
	a.kill()
	killed := time.Now()

	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"), sessionTimeout(60*time.Second), fastCommits)
	v := waitTasks(t, b, 20*time.Second, "B, started after A died, runs A's tasks (A's session would expire only after 60s)", func(v tasksView) bool {
		return slices.Equal(v.Active, []string{"0_0", "0_1"})
	})
	t.Logf("B runs %v %v after A was killed (session timeout 60s)", v.Active, time.Since(killed).Round(time.Millisecond))
	checkCounts(t, out, addCounts(want, more))
}
