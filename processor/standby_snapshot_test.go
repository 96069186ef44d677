package processor_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// snapshotsWritten counts the "snapshot written" lines of a JSON log by
// task.
func (b *logBuffer) snapshotsWritten(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "snapshot written" {
			continue
		}
		task, _ := m["task"].(string)
		out[task]++
	}
	return out
}

// TestStandbysWriteNoSnapshots: a task's snapshot chain is written by the
// instance that runs it. Its standby holds the same state but writes none:
// two writers per task doubled the snapshot I/O, and each one's retention
// pruned the chain the other was still extending. Each of the two
// instances runs one task and keeps the other's standby.
func TestStandbysWriteNoSnapshots(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	appID := kafkatestName(t, "standbysnap")
	topo := countTopology(t, appID, in, out)
	url := "file://" + t.TempDir()
	logs := map[string]*logBuffer{"a": {}, "b": {}}
	start := func(id string) *processor.App {
		app, _ := runApp(t, topo, processor.WithInstanceID(id), processor.WithStandbyReplicas(1), processor.WithSnapshotStore(url),
			fastCheckpoints, processor.WithHTTP("127.0.0.1:0"), fastCommits,
			processor.WithLogger(slog.New(slog.NewJSONHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelDebug}))))
		return app
	}
	want := produceKeysN(t, in, 0, 2_000, 500, 2)
	a := start("a")
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(2_000))
	b := start("b")
	views := map[string]tasksView{}
	for id, app := range map[string]*processor.App{"a": a, "b": b} {
		views[id] = waitTasks(t, app, 60*time.Second, id+" runs one task and keeps the other's standby", func(v tasksView) bool {
			return len(v.Active) == 1 && len(v.Standby) == 1 && v.Standby[0].Lag >= 0 && v.Standby[0].Lag <= 10
		})
	}
	t.Logf("a: %+v, b: %+v", views["a"], views["b"])
	// Counted from here: before b joined, a ran (and snapshotted) both.
	before := map[string]map[string]int{"a": logs["a"].snapshotsWritten(t), "b": logs["b"].snapshotsWritten(t)}
	// New state in both tasks, for both instances to snapshot.
	more := produceKeysN(t, in, 2_000, 4_000, 500, 2)
	checkCounts(t, out, addCounts(want, more))
	since := func(id string) map[string]int {
		w := logs[id].snapshotsWritten(t)
		for task, n := range before[id] {
			w[task] -= n
		}
		return w
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := true
		for id, v := range views {
			w := since(id)
			if n := w[v.Standby[0].Task]; n > 0 {
				t.Fatalf("%s wrote %d snapshots of %s, whose standby it keeps (since b joined: %v)", id, n, v.Standby[0].Task, w)
			}
			done = done && w[v.Active[0]] >= 1
		}
		if done {
			// A last round or two may still run: none of them may
			// snapshot a standby either.
			time.Sleep(2 * time.Second)
			for id, v := range views {
				if n := since(id)[v.Standby[0].Task]; n > 0 {
					t.Fatalf("%s wrote %d snapshots of %s, whose standby it keeps", id, n, v.Standby[0].Task)
				}
			}
			t.Logf("snapshots since b joined: a %v, b %v", since("a"), since("b"))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new snapshot of each active task within 20s: a %v, b %v", since("a"), since("b"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
