package processor_test

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// tasksView is the body of GET /tasks.
type tasksView struct {
	Active  []string         `json:"active"`
	Standby []standbyView    `json:"standby"`
	Lags    map[string]int64 `json:"lags"`
}

type standbyView struct {
	Task   string `json:"task"`
	WarmUp bool   `json:"warmup"`
	Lag    int64  `json:"lag"`
}

func getTasks(t *testing.T, app *processor.App) tasksView {
	t.Helper()
	for i := 0; app.HTTPAddr() == "" && i < 100; i++ {
		time.Sleep(100 * time.Millisecond) // Run binds it
	}
	var v tasksView
	getJSON(t, "http://"+app.HTTPAddr()+"/tasks", &v)
	return v
}

// waitTasks polls app's /tasks until cond holds.
func waitTasks(t *testing.T, app *processor.App, timeout time.Duration, what string, cond func(tasksView) bool) tasksView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := getTasks(t, app)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; /tasks: %+v", what, timeout, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// toRestore sums, over the restores a listener heard of, the changelog
// offsets each was to read.
func (r *restoreRecorder) toRestore() (total int64, byTask map[topology.TaskID]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byTask = map[topology.TaskID]int64{}
	for id, ss := range r.starts {
		for _, s := range ss {
			byTask[id] += s[1] - s[0]
			total += s[1] - s[0]
		}
	}
	return total, byTask
}

func atLeast(n int) func([]*kgo.Record) bool {
	return func(rs []*kgo.Record) bool { return len(rs) >= n }
}

// countOnTwoPartitions creates a count application's input and output
// topics (2 partitions each) and produces n records over keys keys: the
// rig of the standby tests.
func countOnTwoPartitions(t *testing.T, name string, n, keys int) (in, out, appID string, topo *topology.Topology, want map[string]int) {
	t.Helper()
	in, out = kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	appID = kafkatestName(t, name)
	return in, out, appID, countTopology(t, appID, in, out), produceKeysN(t, in, 0, n, keys, 2)
}

func sessionTimeout(d time.Duration) processor.Option {
	return func(c *processor.Config) { c.SessionTimeout = d }
}

var fastCommits = processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 50 * time.Millisecond})

// TestStandbyTakesOverAfterAKillRestoringOnlyTheTail runs instance A (a
// child process) alone on a count table of 100k keys, then instance B with
// one standby replica: B tails both tasks' changelogs (one as a standby,
// the other as a warm-up, A keeping both actives) until its lag is ~0;
// the warm-up's task may move to B as soon as it caught up (KIP-441),
// taking the warm-up's open DB over. A is SIGKILLed while it processes
// more input, with a transaction open; B takes both tasks over once A's
// session times out and restores only the changelog tail its standbys
// had not read (under a tenth of the changelogs; typically nothing but
// A's aborted transaction), not the 100k records, in the DBs the
// standbys kept open: no reopen from the baseline on, whether the
// warm-up moved before it, after it or with the kill. The outputs are
// exactly once: every key's counts are 1..n.
func TestStandbyTakesOverAfterAKillRestoringOnlyTheTail(t *testing.T) {
	t.Parallel()
	const keys = 100_000
	in, out, appID, topo, want := countOnTwoPartitions(t, "standby", keys, keys)
	start := time.Now()
	a := startChild(t, childEnv(t, appID, in, out, "a", "CHILD_STANDBYS=1"))
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(keys))
	t.Logf("A processed %d records in %v", keys, time.Since(start).Round(time.Millisecond))

	rec := newRestoreRecorder()
	var blog testlog.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("B's log:\n%s", blog.String())
		}
	})
	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithStandbyReplicas(1), processor.WithRestoreListener(rec),
		processor.WithLogger(slog.New(slog.NewTextHandler(&blog, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		processor.WithHTTP("127.0.0.1:0"), sessionTimeout(6*time.Second), fastCommits)
	start = time.Now()
	var warmups []string
	v := waitTasks(t, b, 40*time.Second, "B's standbys caught up", func(v tasksView) bool {
		caught := 0
		for _, s := range v.Standby {
			if s.Lag >= 0 && s.Lag <= 100 {
				caught++
			}
		}
		for _, id := range v.Active {
			if !slices.Contains(warmups, id) {
				t.Fatalf("B got active task %s, not one it warmed up (%v), while A is caught up and B is not", id, warmups)
			}
			caught++
		}
		for _, s := range v.Standby {
			if s.WarmUp && !slices.Contains(warmups, s.Task) {
				warmups = append(warmups, s.Task)
			}
		}
		return caught == 2
	})
	t.Logf("B's standbys caught up in %v: %+v", time.Since(start).Round(time.Millisecond), v)

	// The standbys' rebuilds end with a reopen of their DBs (restore
	// mode): the baseline is taken once the count stopped moving.
	opens := metric(t, b, "tidemark_state_task_db_opens_total")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		n := metric(t, b, "tidemark_state_task_db_opens_total")
		if n == opens {
			break
		}
		opens = n
	}

	// More input, and A dies in the middle of processing it.
	more := produceKeysN(t, in, keys, 20_000, keys, 2)
	all := addCounts(want, more)
	kafkatest.ConsumeUntil(t, out, 30*time.Second, atLeast(keys+2_000))
	a.kill()
	killed := time.Now()
	v = waitTasks(t, b, 40*time.Second, "B took both tasks over", func(v tasksView) bool {
		return slices.Equal(v.Active, []string{"0_0", "0_1"}) && len(v.Standby) == 0
	})
	t.Logf("B runs %v %v after the kill", v.Active, time.Since(killed).Round(time.Millisecond))
	// The active tasks took the standbys' open DBs over: reopening them
	// flushed the memtables and often started a level-0 compaction that
	// stalled every task right at the takeover.
	if n := metric(t, b, "tidemark_state_task_db_opens_total"); n != opens {
		t.Errorf("B opened task DBs %v times at the takeover; want 0 (the standbys' DBs handed over)", n-opens)
	}
	checkCounts(t, out, all)
	// The tail is what A committed after the standbys' last round, plus
	// the offsets of the transaction A left open (read_committed: the
	// standbys stop below it; B's restore reads past it once B aborted
	// it, applying none of its records).
	total, byTask := rec.toRestore()
	rec.mu.Lock()
	var applied int64
	for _, ends := range rec.ends {
		for _, n := range ends {
			applied += n
		}
	}
	rec.mu.Unlock()
	t.Logf("B read %d changelog offsets on takeover (%v) and applied %d records, of %d+ records in the changelogs", total, byTask, applied, keys)
	if total > keys/10 {
		t.Fatalf("B read %d changelog offsets on takeover (%v): its standbys should have left only the tail", total, byTask)
	}
}

// TestWarmUpBeforeMovingActiveTasks grows a group of a count application
// on 3 partitions (20k keys each) from one instance to three, with
// probing rebalances every 2s. Each joining instance has no state: the
// group leaves the active tasks with their caught-up owners and gives the
// newcomer its balanced share as warm-ups; only after a probing rebalance
// finds them caught up (lag ≤ 10,000, the default acceptable recovery
// lag) do the tasks move. So the third instance's /tasks shows warm-ups
// before any active task, and each active restore it runs reads at most
// the acceptable lag, never the 20k records of a partition. Counts stay
// exactly once.
func TestWarmUpBeforeMovingActiveTasks(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 3), kafkatestNewTopic(t, 3)
	appID := kafkatestName(t, "warmup")
	topo := countTopology(t, appID, in, out)
	const keys = 60_000
	want := produceKeysN(t, in, 0, keys, keys, 3)
	probe := processor.WithProbingRebalanceInterval(2 * time.Second)
	start := time.Now()
	runApp(t, topo, processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"), probe, fastCommits)
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(keys))
	t.Logf("A processed %d records in %v", keys, time.Since(start).Round(time.Millisecond))

	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"), probe, fastCommits)
	waitTasks(t, b, 45*time.Second, "B got an active task after warming up", func(v tasksView) bool { return len(v.Active) > 0 })

	rec := newRestoreRecorder()
	c, _ := runApp(t, topo, processor.WithInstanceID("c"), processor.WithHTTP("127.0.0.1:0"), probe, fastCommits, processor.WithRestoreListener(rec))
	start = time.Now()
	var warmed []string
	v := waitTasks(t, c, 45*time.Second, "C got an active task", func(v tasksView) bool {
		if len(v.Active) == 0 {
			for _, s := range v.Standby {
				if s.WarmUp && !slices.Contains(warmed, s.Task) {
					warmed = append(warmed, s.Task)
				}
			}
		}
		return len(v.Active) > 0
	})
	t.Logf("C warmed up %v, then runs %v, %v after it started", warmed, v.Active, time.Since(start).Round(time.Millisecond))
	if len(warmed) == 0 {
		t.Fatal("C got an active task without a warm-up first")
	}
	more := produceKeysN(t, in, keys, 6_000, keys, 3)
	checkCounts(t, out, addCounts(want, more))
	_, byTask := rec.toRestore()
	for id, n := range byTask {
		if n > 10_000 {
			t.Fatalf("C's active task %s restored %d changelog offsets: it was moved before its warm-up caught up (restores %v)", id, n, byTask)
		}
	}
	t.Logf("C's active restores: %v", byTask)
}

// TestNewInstanceTakesSmallTasksAtOnce: a member without state lags by
// the changelogs' end offsets, as in Kafka Streams, so a new instance
// takes a task whose whole changelog is within the acceptable recovery
// lag in the rebalance it joins with, instead of warming it up first and
// taking it in a probing rebalance after.
func TestNewInstanceTakesSmallTasksAtOnce(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	appID := kafkatestName(t, "small-state")
	topo := countTopology(t, appID, in, out)
	const keys = 400
	want := produceKeysN(t, in, 0, keys, keys, 2)
	runApp(t, topo, processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"), fastCommits)
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(keys))

	var logs logBuffer
	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"), fastCommits,
		processor.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	v := waitTasks(t, b, 30*time.Second, "B got an active task", func(v tasksView) bool { return len(v.Active) > 0 })
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if n, _ := m["warmups"].(float64); m["msg"] == "standby tasks started" && n > 0 {
			t.Fatalf("B warmed up tasks before running %v, though their changelogs (~%d records each) are within the acceptable lag: %s", v.Active, keys/2, line)
		}
	}
	t.Logf("B runs %v", v.Active)
	more := produceKeysN(t, in, keys, 200, keys, 2)
	checkCounts(t, out, addCounts(want, more))
}

// TestMovedTaskLeavesItsOpenDBToTheOldOwnersStandby runs A alone with one
// standby replica on a count table of 2 partitions (20k keys), then B: B
// warms one task up, the task moves to B once caught up, and A keeps a
// standby of it. A's standby takes the DB its active task had open (no
// close and reopen on the member that still runs its other task: a
// memtable flush and cold caches right at the move) and tails from where
// the active task left off. Counts stay exactly once.
func TestMovedTaskLeavesItsOpenDBToTheOldOwnersStandby(t *testing.T) {
	t.Parallel()
	const keys = 20_000
	in, out, _, topo, want := countOnTwoPartitions(t, "handback", keys, keys)
	a, _ := runApp(t, topo, processor.WithInstanceID("a"), processor.WithStandbyReplicas(1), processor.WithHTTP("127.0.0.1:0"), fastCommits)
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(keys))
	opens := metric(t, a, "tidemark_state_task_db_opens_total")
	if opens != 2 {
		t.Fatalf("A opened task DBs %v times running 2 tasks; want 2", opens)
	}

	b, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithStandbyReplicas(1), processor.WithHTTP("127.0.0.1:0"), fastCommits)
	v := waitTasks(t, b, 45*time.Second, "B got the task it warmed up", func(v tasksView) bool { return len(v.Active) == 1 })
	moved := v.Active[0]
	va := waitTasks(t, a, 30*time.Second, "A keeps a caught-up standby of the moved task", func(v tasksView) bool {
		return slices.ContainsFunc(v.Standby, func(s standbyView) bool { return s.Task == moved && s.Lag >= 0 && s.Lag <= 100 })
	})
	t.Logf("B runs %s; A: %+v", moved, va)
	if n := metric(t, a, "tidemark_state_task_db_opens_total"); n != opens {
		t.Errorf("A opened task DBs %v more times as %s moved to B; want 0 (its standby takes the active task's open DB)", n-opens, moved)
	}

	more := produceKeysN(t, in, keys, 4_000, keys, 2)
	checkCounts(t, out, addCounts(want, more))
}
