package processor_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func childEnv(t *testing.T, appID, in, out, instance string, extra ...string) []string {
	return append([]string{"TIDEMARK_TEST_CHILD=1", "CHILD_APP=" + appID, "CHILD_IN=" + in, "CHILD_OUT=" + out,
		"CHILD_BROKERS=" + brokers(t), "CHILD_STATE=" + t.TempDir(), "CHILD_INSTANCE=" + instance,
		"CHILD_SESSION_TIMEOUT=6s"}, extra...)
}

// TestRebalanceScaleUpAndDownStaysExactlyOnce grows the group from one to
// three instances and shrinks it again (a graceful stop, then a SIGKILL)
// while input keeps arriving. Partitions move between instances, whose new
// owners restore the state from the changelog; every count must still be
// exactly 1..n.
func TestRebalanceScaleUpAndDownStaysExactlyOnce(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "rebalance")
	want := map[string]int{}
	produced := 0
	feed := func(n int) {
		for k, c := range produceKeysN(t, in, produced, n, 24, 4) {
			want[k] += c
		}
		produced += n
	}
	a := startChild(t, childEnv(t, appID, in, out, "a"))
	feed(800)
	time.Sleep(time.Second)
	b := startChild(t, childEnv(t, appID, in, out, "b"))
	feed(800)
	time.Sleep(time.Second)
	c := startChild(t, childEnv(t, appID, in, out, "c"))
	feed(800)
	time.Sleep(2 * time.Second)
	a.terminate(t) // scale down gracefully: a leaves, its partitions move now
	feed(800)
	time.Sleep(2 * time.Second)
	b.kill() // and abruptly: b's partitions move after its session times out
	feed(800)
	checkCounts(t, out, want)
	c.terminate(t)
}

// TestZombieCannotCommitAfterItsPartitionsMoved freezes an instance in the
// middle of a commit (SIGSTOP with its transaction's records flushed),
// waits past its session timeout so the group hands its partitions to a
// second instance, lets that one process everything, then resumes the
// zombie. The zombie's commit must fail (its generation is fenced), none of
// its outputs may become visible, and every count is exactly 1..n.
func TestZombieCannotCommitAfterItsPartitionsMoved(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 2)
	out := kafkatestNewTopic(t, 2)
	appID := kafkatestName(t, "zombie")
	want := produceKeysN(t, in, 0, 500, 10, 2)
	zombie := startChild(t, childEnv(t, appID, in, out, "zombie", "CHILD_PAUSE_BEFORE_END=1", "CHILD_TXN_TIMEOUT=40s"))
	waitStopped(t, zombie, 30*time.Second)

	successor := startChild(t, childEnv(t, appID, in, out, "successor"))
	for k, n := range produceKeysN(t, in, 500, 500, 10, 2) {
		want[k] += n
	}
	// The zombie's open transaction holds back read_committed readers of
	// the output; resuming it makes it find out it was fenced and abort.
	time.Sleep(8 * time.Second)
	_ = zombie.cmd.Process.Signal(syscall.SIGCONT)
	checkCounts(t, out, want)
	successor.terminate(t)
	zombie.terminate(t)
}

func waitStopped(t *testing.T, c *child, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
		if err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'T' {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the zombie never reached its commit")
}
