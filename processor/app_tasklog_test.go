package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/txn"
)

// logBuffer collects JSON log lines from the App's goroutines.
type logBuffer struct{ testlog.Buffer }

// taskStates returns the "task state" lines, in order, decoded.
func (b *logBuffer) taskStates(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue // nothing logged yet: Split("") is [""]
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "task state" {
			out = append(out, m)
		}
	}
	return out
}

// A task's life in one run: assigned, restoring when its changelogs hold
// something to restore, running; rebalances may revoke and reassign it;
// the shutdown closes it.
var taskLife = regexp.MustCompile(`^(assigned (restoring )?running (revoked assigned (restoring )?running )*)+closed$`)

// checkTaskStates groups the lines by task, checks each line's attributes
// and each task's sequence of states, and returns the lines per task.
func checkTaskStates(t *testing.T, lines []map[string]any, tasks ...string) map[string][]map[string]any {
	t.Helper()
	byTask := map[string][]map[string]any{}
	for _, l := range lines {
		t.Logf("%v %v state=%v restored=%v to_restore=%v reason=%v", l["task"], l["partition"], l["state"], l["restored"], l["to_restore"], l["reason"])
		id, _ := l["task"].(string)
		if l["level"] != "INFO" || fmt.Sprintf("%v_%v", l["subtopology"], l["partition"]) != id {
			t.Errorf("task state line %v: want level INFO and task = subtopology_partition", l)
		}
		byTask[id] = append(byTask[id], l)
	}
	if len(byTask) != len(tasks) {
		t.Errorf("task state lines for %d tasks, want %v: %v", len(byTask), tasks, lines)
	}
	for _, id := range tasks {
		var states []string
		for _, l := range byTask[id] {
			states = append(states, fmt.Sprint(l["state"]))
		}
		if seq := strings.Join(states, " "); !taskLife.MatchString(seq) {
			t.Errorf("task %s went through %q, want assigned → restoring? → running → ... → closed", id, seq)
		}
		if last := byTask[id][len(byTask[id])-1]; last["reason"] != "shutdown" {
			t.Errorf("task %s closed with reason %v, want shutdown", id, last["reason"])
		}
	}
	return byTask
}

// Every task state change is one "task state" line with the task, its
// sub-topology and partition and the state: a first run with empty
// changelogs goes assigned → running → closed; a second run on a fresh
// state directory restores in between, and says how much.
func TestAppLogsOneLinePerTaskStateChange(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "app"), in, out)
	want := produceKeys(t, in, 0, 200, 12)

	var first logBuffer
	_, stop := runApp(t, topo, processor.WithLogger(slog.New(slog.NewJSONHandler(&first, nil))))
	checkCounts(t, out, want)
	stop()
	byTask := checkTaskStates(t, first.taskStates(t), "0_0", "0_1")
	for id, lines := range byTask {
		for _, l := range lines {
			if l["state"] == "restoring" {
				t.Errorf("task %s restoring on empty changelogs: %v", id, l)
			}
			if l["state"] == "running" && (l["restored"] != 0.0 || l["restore_duration"] == nil || l["rebuilt"] == nil) {
				t.Errorf("task %s running line %v: want restored=0, a restore_duration and rebuilt", id, l)
			}
		}
	}
	if t.Failed() {
		t.Fatalf("first run's log:\n%s", first.String())
	}

	// A fresh state directory: the tasks restore their counts.
	var second logBuffer
	_, stop = runApp(t, topo, processor.WithLogger(slog.New(slog.NewJSONHandler(&second, nil))))
	deadline := time.Now().Add(20 * time.Second)
	for running := 0; running < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("tasks not running within 20s:\n%s", second.String())
		}
		time.Sleep(100 * time.Millisecond)
		running = 0
		for _, l := range second.taskStates(t) {
			if l["state"] == "running" {
				running++
			}
		}
	}
	stop()
	byTask = checkTaskStates(t, second.taskStates(t), "0_0", "0_1")
	for id, lines := range byTask {
		var restoring, running map[string]any
		for _, l := range lines {
			switch l["state"] {
			case "restoring":
				restoring = l
			case "running":
				running = l
			}
		}
		if restoring == nil || restoring["to_restore"].(float64) <= 0 {
			t.Errorf("task %s: restoring line %v, want one with to_restore > 0", id, restoring)
		}
		if running == nil || running["restored"].(float64) <= 0 || running["restore_duration"] == nil {
			t.Errorf("task %s: running line %v, want restored > 0 and a restore_duration", id, running)
		}
	}
	if t.Failed() {
		t.Logf("second run's log:\n%s", second.String())
	}
}

// Another producer taking the instance's transactional id fences the
// session: its tasks are logged fenced, and the next session brings them
// back, assigned → running.
func TestAppLogsFencedTasks(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "app")
	topo := countTopology(t, appID, in, out)
	want := produceKeys(t, in, 0, 100, 12)

	var logs logBuffer
	_, stop := runApp(t, topo, processor.WithInstanceID("fenced"), processor.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	checkCounts(t, out, want)

	// Take the transactional id: InitProducerID bumps the epoch.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.TransactionalID(txn.TransactionalID(appID, "fenced")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, _, err = cl.ProducerID(ctx)
	cancel()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range produceKeys(t, in, 100, 100, 12) {
		want[k] += n
	}
	checkCounts(t, out, want)
	stop()

	lines := logs.taskStates(t)
	for _, id := range []string{"0_0", "0_1"} {
		var states []string
		for _, l := range lines {
			if l["task"] == id {
				states = append(states, fmt.Sprint(l["state"]))
			}
		}
		seq := strings.Join(states, " ")
		t.Logf("task %s: %s", id, seq)
		if !regexp.MustCompile(`^assigned running .*fenced assigned (restoring )?running .*closed$`).MatchString(seq) {
			t.Errorf("task %s went through %q, want assigned → running → fenced → assigned → running → closed", id, seq)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs.String())
	}
}

// A second instance joining takes one of the two tasks: the first logs it
// revoked, the second assigned → running, and each closes what it holds
// when stopped.
func TestAppLogsRevokedTasks(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	out := kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "app"), in, out)
	want := produceKeys(t, in, 0, 100, 12)

	var logsA, logsB logBuffer
	_, stopA := runApp(t, topo, processor.WithInstanceID("a"), processor.WithLogger(slog.New(slog.NewJSONHandler(&logsA, nil))))
	checkCounts(t, out, want)
	_, stopB := runApp(t, topo, processor.WithInstanceID("b"), processor.WithLogger(slog.New(slog.NewJSONHandler(&logsB, nil))))
	deadline := time.Now().Add(20 * time.Second)
	moved := ""
	for moved == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no task moved to the second instance within 20s:\n%s\n%s", logsA.String(), logsB.String())
		}
		time.Sleep(100 * time.Millisecond)
		for _, l := range logsB.taskStates(t) {
			if l["state"] == "running" {
				moved = l["task"].(string)
			}
		}
	}
	stopB()
	stopA()

	seqs := func(lines []map[string]any) map[string]string {
		out := map[string]string{}
		for _, l := range lines {
			id := l["task"].(string)
			if fmt.Sprintf("%v_%v", l["subtopology"], l["partition"]) != id {
				t.Errorf("task state line %v: task is not subtopology_partition", l)
			}
			out[id] = strings.TrimSpace(out[id] + " " + fmt.Sprint(l["state"]))
		}
		return out
	}
	a, b := seqs(logsA.taskStates(t)), seqs(logsB.taskStates(t))
	t.Logf("instance a: %v; instance b: %v", a, b)
	if !regexp.MustCompile(`^assigned running revoked( |$)`).MatchString(a[moved]) {
		t.Errorf("task %s on the first instance went through %q, want assigned → running → revoked", moved, a[moved])
	}
	if !regexp.MustCompile(`^assigned (restoring )?running .*closed$`).MatchString(b[moved]) {
		t.Errorf("task %s on the second instance went through %q, want assigned → restoring? → running → closed", moved, b[moved])
	}
	for id, seq := range a {
		if id != moved && !taskLife.MatchString(seq) {
			t.Errorf("task %s on the first instance went through %q, want assigned → running → closed", id, seq)
		}
	}
}
