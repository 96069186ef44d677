package processor_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestAtLeastOnceUnderCrashesKeepsState runs the count with the
// at-least-once guarantee as a child process, SIGKILLs it while it is busy
// (and lets it kill itself around commits), and restarts it, alternately
// on the same state directory and on a fresh one (restored from the
// changelogs alone), under the same instance id. At-least-once may repeat
// work, never lose it:
//
//   - every count a run emits for a key is above the number of the key's
//     inputs below the group's committed offsets when the run started:
//     the state it restored reflects at least the committed inputs (a
//     count that starts again from 1 is lost state);
//   - each key's final count is at least the number of its inputs.
func TestAtLeastOnceUnderCrashesKeepsState(t *testing.T) {
	t.Parallel()
	const partitions = 2
	in := kafkatestNewTopic(t, partitions)
	out := kafkatestNewTopic(t, partitions)
	appID := kafkatestName(t, "alos-crash")
	env := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_GUARANTEE=at_least_once", "CHILD_APP=" + appID,
		"CHILD_IN=" + in, "CHILD_OUT=" + out, "CHILD_BROKERS=" + brokers(t), "CHILD_SELF_KILL=0.05",
		"CHILD_INSTANCE=alos-crash-1"}
	seed := crashTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))

	var inputs []*kgo.Record // with their offsets
	produce := func(n int) {
		from := len(inputs)
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			k := fmt.Sprintf("sku-%02d", i%16)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
				Partition: processor.DefaultPartition([]byte(k), partitions)})
		}
		kafkatest.Produce(t, recs...)
		inputs = append(inputs, recs...)
	}
	// committedCounts is, per key, the number of its inputs below the
	// group's committed offsets: what any restored state must reflect.
	committedCounts := func() map[string]int64 {
		committed := kafkatest.Committed(t, appID, in)
		n := map[string]int64{}
		for _, r := range inputs {
			if r.Offset < committed[r.Partition] {
				n[string(r.Key)]++
			}
		}
		return n
	}

	// round is one run of the child: the outputs from start on (by output
	// partition) are its own, and each key's counts must exceed floor.
	type round struct {
		dir   string
		start map[int32]int64
		floor map[string]int64
	}
	var rounds []round
	sameDir := t.TempDir()
	const kills = 5
	var last *child
	for r := range kills + 1 {
		dir := sameDir
		if r%2 == 1 {
			dir = t.TempDir() // a fresh directory: everything from the changelogs
		}
		if r > 0 {
			// The killed child's last produce requests land before the
			// next run's outputs are told apart from its own.
			time.Sleep(300 * time.Millisecond)
		}
		rounds = append(rounds, round{dir: dir, start: kafkatest.StableEnds(t, out), floor: committedCounts()})
		childEnv := append(slices.Clone(env), "CHILD_STATE="+dir, "CHILD_SEED="+strconv.FormatUint(seed+uint64(r), 10))
		if r == kills {
			childEnv = append(childEnv, "CHILD_SELF_KILL=0")
		}
		c := startChild(t, childEnv)
		for range 3 {
			produce(150)
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		}
		if r < kills {
			// Killed while busy with a burst: its changelog, outputs and
			// offsets at different points.
			produce(5000)
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
			c.kill()
			continue
		}
		last = c
	}

	want := map[string]int64{}
	for _, r := range inputs {
		want[string(r.Key)]++
	}
	final := func(rs []*kgo.Record) map[string]int64 {
		m := map[string]int64{}
		for _, r := range rs {
			m[string(r.Key)] = max(m[string(r.Key)], int64(binary.BigEndian.Uint64(r.Value)))
		}
		return m
	}
	recs := kafkatest.ConsumeUntil(t, out, time.Minute, func(rs []*kgo.Record) bool {
		got := final(rs)
		for k, n := range want {
			if got[k] < n {
				return false
			}
		}
		return true
	})
	last.terminate(t)

	// Which run emitted each output: the last round whose start offset of
	// the output's partition it is at or past.
	runOf := func(r *kgo.Record) int {
		run := 0
		for i, rd := range rounds {
			if r.Offset >= rd.start[r.Partition] {
				run = i
			}
		}
		return run
	}
	// A count lower than one emitted before is at-least-once's replay of
	// uncommitted input onto restored state, down to 1 for a key none of
	// whose inputs were committed: logged, not an error, unless it goes
	// below the committed inputs.
	went, back := map[string]int64{}, 0
	for _, rec := range recs {
		k, n := string(rec.Key), int64(binary.BigEndian.Uint64(rec.Value))
		if n <= went[k] {
			if back++; back <= 3 {
				t.Logf("key %s: count %d after %d (run %d; %d of its inputs committed when the run started)",
					k, n, went[k], runOf(rec), rounds[runOf(rec)].floor[k])
			}
		}
		went[k] = n
		run := runOf(rec)
		if floor := rounds[run].floor[k]; n <= floor {
			t.Fatalf("seed %d: run %d (state dir %s): key %s: count %d, but %d of its inputs were committed before the run started: state was lost",
				seed, run, rounds[run].dir, k, n, floor)
		}
	}
	got := final(recs)
	for k, n := range want {
		if got[k] < n {
			t.Fatalf("seed %d: key %s: final count %d below its %d inputs", seed, k, got[k], n)
		}
	}
	total := 0
	for _, n := range want {
		total += int(n)
	}
	t.Logf("seed %d: %d inputs, %d outputs (%d repeated by at-least-once), %d counts below one emitted before", seed, total, len(recs), len(recs)-total, back)
}
