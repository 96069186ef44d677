package processor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

const (
	crashJoinWindow = int64(250) // ms: a left and a right record at most this far apart join
	crashJoinGrace  = int64(100)
	// crashJoinDisorder is how far (ms) behind its partition's newest
	// record an input record may be stamped. The join's stores keep what
	// is at most window + window + grace behind stream time, and a record
	// at t is at least stream time − disorder: the partner it finds, at
	// least t − window, is at least stream time − disorder − window. With
	// the disorder at most window + grace, every partner is still held
	// and the join finds every pair, so the reference is all of them.
	crashJoinDisorder = int64(150)
	crashJoinKeys     = 64
)

// buildJoin splits the input by value prefix into a left ("L:<id>") and a
// right ("R:<id>") stream and inner-joins them on the key within
// crashJoinWindow, emitting "<leftid>+<rightid>".
func buildJoin(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	sides := b.Stream(in, serde.String(), serde.String()).Split(topology.Named("sides"))
	id := func(_, v string) string { return v[2:] }
	left := sides.Branch(func(_, v string) bool { return strings.HasPrefix(v, "L:") }, topology.Named("left")).MapValues(id)
	right := sides.Branch(func(_, v string) bool { return strings.HasPrefix(v, "R:") }, topology.Named("right")).MapValues(id)
	w := topology.JoinWindowsOf(time.Duration(crashJoinWindow)*time.Millisecond, time.Duration(crashJoinGrace)*time.Millisecond)
	left.Join(right, func(_, l, r string) string { return l + "+" + r }, w, topology.Named("pairs")).To(out)
	return b.Build()
}

// joinInput is one input record of the join test: its id is its value's
// number (unique over both sides) and its position in the produced order.
type joinInput struct {
	key       string
	left      bool
	id        int
	ts        int64
	partition int32
}

type joinPair struct{ l, r int }

// joinReference returns every pair of a left and a right record with
// equal keys at most crashJoinWindow apart (either way, bounds included),
// each with the record the join emits for it: the key and the later of the
// two timestamps. It also returns how many pairs sit exactly at the window
// bound and how many left/right couples miss it by 1 ms (the join must
// emit the first and not the second), and the largest disorder: how far a
// record is stamped behind the newest before it in its partition.
func joinReference(inputs []joinInput) (want map[joinPair]joinInput, atBound, justOut int, disorder int64) {
	want = map[joinPair]joinInput{}
	byKey := map[string][]joinInput{}
	newest := map[int32]int64{}
	for _, in := range inputs {
		byKey[in.key] = append(byKey[in.key], in)
		if n, ok := newest[in.partition]; ok {
			disorder = max(disorder, n-in.ts)
		}
		newest[in.partition] = max(newest[in.partition], in.ts)
	}
	for _, recs := range byKey {
		for _, l := range recs {
			if !l.left {
				continue
			}
			for _, r := range recs {
				if r.left {
					continue
				}
				d := max(l.ts-r.ts, r.ts-l.ts)
				switch {
				case d <= crashJoinWindow:
					want[joinPair{l.id, r.id}] = joinInput{key: l.key, ts: max(l.ts, r.ts)}
					if d == crashJoinWindow {
						atBound++
					}
				case d == crashJoinWindow+1:
					justOut++
				}
			}
		}
	}
	return want, atBound, justOut, disorder
}

// TestJoinExactlyOnceUnderCrashes is TestExactlyOnceUnderCrashes for an
// inner stream-stream join: one input over 2 partitions carries left and
// right records of 64 keys, stamped a little out of order (up to
// crashJoinDisorder behind), and the child splits it by value prefix and
// joins the two sides on the key. It SIGKILLs the service process
// mid-stream and lets it kill itself at its commit points, restarts it on
// the same state (once on an empty state directory, so that the join's
// stores are restored from their changelogs), and checks the output,
// read_committed, against the reference: every pair of a left and a right
// record with equal keys at most the window apart, exactly once, and
// nothing else. A pair emitted in an aborted transaction and again on the
// redo is a duplicate; a record the join's stores lost in a crash (or
// expired too early, by a stream time that ran ahead) is a lost pair.
func TestJoinExactlyOnceUnderCrashes(t *testing.T) {
	t.Parallel()
	if crashJoinDisorder > crashJoinWindow+crashJoinGrace {
		t.Fatal("the disorder exceeds what the join's stores retain: the reference would not hold")
	}
	const partitions = 2
	in, out := kafkatestNewTopic(t, partitions), kafkatestNewTopic(t, partitions)
	env := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_TOPOLOGY=join", "CHILD_APP=" + kafkatestName(t, "jcrash"),
		"CHILD_IN=" + in, "CHILD_OUT=" + out, "CHILD_BROKERS=" + brokers(t), "CHILD_INSTANCE=j", "CHILD_SELF_KILL=0.05",
		"CHILD_THREADS=" + os.Getenv("CRASH_TEST_THREADS"), "CHILD_GUARANTEE=" + os.Getenv("CRASH_TEST_GUARANTEE")}
	state := t.TempDir()
	seed := crashTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 13))
	var inputs []joinInput
	// Time moves 0–3 ms a record (so records share timestamps and pairs
	// fall exactly on the window bound); each is stamped up to
	// crashJoinDisorder behind.
	clock := time.Now().Add(-time.Hour).UnixMilli()
	produce := func(n int) {
		var recs []*kgo.Record
		for range n {
			clock += rng.Int64N(4)
			k := fmt.Sprintf("k-%02d", rng.IntN(crashJoinKeys))
			rec := joinInput{key: k, left: rng.IntN(2) == 0, id: len(inputs), ts: clock - rng.Int64N(crashJoinDisorder+1),
				partition: processor.DefaultPartition([]byte(k), partitions)}
			side := "R:"
			if rec.left {
				side = "L:"
			}
			inputs = append(inputs, rec)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(side + strconv.Itoa(rec.id)),
				Timestamp: time.UnixMilli(rec.ts), Partition: rec.partition})
		}
		kafkatest.Produce(t, recs...)
	}
	const kills = 6
	for round := range kills + 1 {
		if round == kills/2 {
			// One restart on an empty state directory, as on a node that
			// lost its disk (same instance id, so the group hands it the
			// partitions at once): the join's stores come back from their
			// changelogs alone.
			state = t.TempDir()
		}
		childEnv := append(slices.Clone(env), "CHILD_STATE="+state, "CHILD_SEED="+strconv.FormatUint(seed+uint64(round), 10))
		if round == kills {
			// The last run must live to finish the input.
			childEnv = append(childEnv, "CHILD_SELF_KILL=0")
		}
		c := killRound(t, childEnv, rng, produce, 250, 1000, round < kills)
		if round < kills {
			continue
		}
		want, atBound, justOut, disorder := joinReference(inputs)
		if disorder == 0 || atBound == 0 || justOut == 0 {
			t.Fatalf("the input has disorder %d ms, %d pairs at the window bound, %d just outside: the test would not tell", disorder, atBound, justOut)
		}
		checkJoinPairs(t, out, inputs, want, fmt.Sprintf("last round, seed %d", seed))
		lefts := 0
		for _, rec := range inputs {
			if rec.left {
				lefts++
			}
		}
		t.Logf("%d records (%d left, %d right) over %d keys, disorder up to %d ms, %d pairs (%d at the window bound, %d 1 ms outside it), %d kills",
			len(inputs), lefts, len(inputs)-lefts, crashJoinKeys, disorder, len(want), atBound, justOut, kills)
		c.terminate(t)
	}
}

// checkJoinPairs reads the join's output read_committed until it holds as
// many records as want has pairs, then for 2 s more, and checks it holds
// each of want's pairs exactly once, with its key and timestamp, and
// nothing else. A failure lists the duplicated, unexpected and missing
// pairs with their input records (what names the check).
func checkJoinPairs(t *testing.T, out string, inputs []joinInput, want map[joinPair]joinInput, what string) {
	t.Helper()
	var got []*kgo.Record
	poll := committedPoller(t, out, &got)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	complete := true
	for len(got) < len(want) && complete {
		complete = poll(ctx)
	}
	if complete {
		qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer qcancel()
		for poll(qctx) {
		}
	}
	describe := func(p joinPair) string {
		l, r := inputs[p.l], inputs[p.r]
		return fmt.Sprintf("%s L:%d@%d+R:%d@%d (input partition %d)", l.key, l.id, l.ts, r.id, r.ts, l.partition)
	}
	seen := map[joinPair][]*kgo.Record{}
	var problems []string
	for _, r := range got {
		var p joinPair
		ls, rs, ok := strings.Cut(string(r.Value), "+")
		var lerr, rerr error
		p.l, lerr = strconv.Atoi(ls)
		p.r, rerr = strconv.Atoi(rs)
		if !ok || lerr != nil || rerr != nil || p.l < 0 || p.l >= len(inputs) || p.r < 0 || p.r >= len(inputs) {
			problems = append(problems, fmt.Sprintf("unreadable output [%d@%d %q=%q]", r.Partition, r.Offset, r.Key, r.Value))
			continue
		}
		seen[p] = append(seen[p], r)
		w, ok := want[p]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("unexpected pair %s at output %d@%d", describe(p), r.Partition, r.Offset))
		case string(r.Key) != w.key || r.Timestamp.UnixMilli() != w.ts:
			problems = append(problems, fmt.Sprintf("pair %s at output %d@%d has key %q, timestamp %d; want %q, %d",
				describe(p), r.Partition, r.Offset, r.Key, r.Timestamp.UnixMilli(), w.key, w.ts))
		}
	}
	var missing []joinPair
	for p := range want {
		if len(seen[p]) == 0 {
			missing = append(missing, p)
		}
	}
	slices.SortFunc(missing, func(a, b joinPair) int { return a.l*len(inputs) + a.r - b.l*len(inputs) - b.r })
	dups := 0
	for p, rs := range seen {
		if len(rs) > 1 {
			dups++
			var at []string
			for _, r := range rs {
				at = append(at, fmt.Sprintf("%d@%d", r.Partition, r.Offset))
			}
			problems = append(problems, fmt.Sprintf("pair %s emitted %d times, at output %s", describe(p), len(rs), strings.Join(at, ", ")))
		}
	}
	for _, p := range missing {
		problems = append(problems, "missing pair "+describe(p))
	}
	if len(problems) == 0 && len(got) == len(want) {
		return
	}
	slices.Sort(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("… (%d more)", len(problems)-20))
	}
	t.Fatalf("%s: %d outputs for %d pairs (output complete: %v): %d missing, %d duplicated:\n  %s",
		what, len(got), len(want), complete, len(missing), dups, strings.Join(problems, "\n  "))
}
