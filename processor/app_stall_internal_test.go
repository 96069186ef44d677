package processor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestStalledThreadSaysWhatItWaitsOn: a thread with work that processes
// nothing for stallAfter logs it at warn level, with its tasks, the task
// restoring behind a sibling's lease and the running task's partition
// paused for no known reason; not before stallAfter, not again within
// it, and not once it processed records, has nothing to do, or only
// restores a task itself.
func TestStalledThreadSaysWhatItWaitsOn(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, 5, 1, 2, frontier.Options{})
	var buf testlog.Buffer
	r.s.app.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r.s.cl = cl
	warnings := func() int { return strings.Count(buf.String(), "stream thread made no progress") }

	// Partition 1's task restores, waiting for the lease thread 1 holds;
	// in/0's task runs, its partition paused by no one's will.
	moving := topology.TaskID{Partition: 1}
	delete(r.s.tasks, moving)
	r.s.index()
	r.s.restoring = map[topology.TaskID]*restoringTask{moving: {}}
	release, err := r.s.app.leases.acquire(context.Background(), moving, "thread 1 task")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	cl.PauseFetchPartitions(map[string][]int32{"in": {0}})

	t0 := r.now
	r.s.watchStall(t0)
	r.s.watchStall(t0.Add(stallAfter - time.Second))
	if n := warnings(); n != 0 {
		t.Fatalf("warned before stallAfter:\n%s", buf.String())
	}
	r.s.watchStall(t0.Add(stallAfter))
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings after stallAfter, want 1:\n%s", n, buf.String())
	}
	got := buf.String()
	for _, want := range []string{"thread=0", "tasks=[0_0]", `0_1 (waits for the lease thread 1 task has held for`, "in/0 (no known reason)", "waits_for=\"paused partitions\""} {
		if !strings.Contains(got, want) {
			t.Fatalf("the warning lacks %q:\n%s", want, got)
		}
	}
	r.s.watchStall(t0.Add(stallAfter + time.Second))
	if n := warnings(); n != 1 {
		t.Fatalf("warned again within stallAfter:\n%s", buf.String())
	}

	// Progress: records processed.
	r.now = t0.Add(stallAfter + 2*time.Second)
	r.feed(0, "a", 0, 3)
	r.pass(t)
	r.s.watchStall(r.now.Add(stallAfter - time.Second))
	if n := warnings(); n != 1 {
		t.Fatalf("warned although records were processed %s ago:\n%s", stallAfter-time.Second, buf.String())
	}

	// Nothing to do: no stall, however long.
	delete(r.s.restoring, moving)
	cl.ResumeFetchPartitions(map[string][]int32{"in": {0}})
	r.s.watchStall(r.now.Add(10 * stallAfter))
	r.s.watchStall(r.now.Add(20 * stallAfter))
	if n := warnings(); n != 1 {
		t.Fatalf("an idle thread warned of a stall:\n%s", buf.String())
	}

	// A long restore of its own is no stall either (it logs its progress).
	release()
	own, err := r.s.app.leases.acquire(context.Background(), moving, "thread 0 task")
	if err != nil {
		t.Fatal(err)
	}
	defer own()
	r.s.restoring = map[topology.TaskID]*restoringTask{moving: {}}
	r.s.watchStall(r.now.Add(30 * stallAfter))
	r.s.watchStall(r.now.Add(40 * stallAfter))
	if n := warnings(); n != 1 {
		t.Fatalf("a thread restoring a task warned of a stall:\n%s", buf.String())
	}
}
