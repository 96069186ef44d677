package processor_test

import (
	"testing"
	"time"
)

// TestNewOwnerRestoresPastADeadMembersOpenTransaction is the rebalance-storm
// loss, made deterministic. Instance x dies with a transaction open (its
// changelog records flushed, EndTxn never sent, a long transaction
// timeout), which pins the changelog's last stable offset. Instance y takes
// the task over and commits more changelog records past x's; then y leaves
// and z takes over. z's restore must reach the changelog position y's
// committed offsets reflect: settling for the pinned last stable offset
// would restore stale counts and make them go down.
func TestNewOwnerRestoresPastADeadMembersOpenTransaction(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 1)
	out := kafkatestNewTopic(t, 1)
	appID := kafkatestName(t, "hanging")
	want := map[string]int{}
	produced := 0
	feed := func(n int) {
		for k, c := range produceKeysN(t, in, produced, n, 8, 1) {
			want[k] += c
		}
		produced += n
	}
	x := startChild(t, childEnv(t, appID, in, out, "x", "CHILD_KILL_AT_COMMIT=4", "CHILD_TXN_TIMEOUT=120s"))
	for !x.exited() {
		feed(40)
		time.Sleep(100 * time.Millisecond)
		if produced > 40_000 {
			t.Fatal("x never reached its fourth commit")
		}
	}
	died := time.Now()
	y := startChild(t, childEnv(t, appID, in, out, "y"))
	feed(300)
	// Within checkCounts' minute, well below x's 120 s transaction
	// timeout: y fenced x's open transaction instead of waiting it out.
	checkCounts(t, out, want) // y took over after x's session timed out
	t.Logf("every output visible %s after x died with its transaction open (its transaction timeout: 120s)", time.Since(died).Round(10*time.Millisecond))
	y.terminate(t)
	z := startChild(t, childEnv(t, appID, in, out, "z"))
	feed(300)
	checkCounts(t, out, want)
	z.terminate(t)
}
