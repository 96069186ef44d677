package processor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// tickCounter is a processor whose wall-clock punctuator, every 20 ms,
// increments its task's tick number in a logged store and forwards it
// (key: the task's partition). Input records only keep the task busy.
type tickCounter struct {
	ctx   topology.ProcessorContext[string, string]
	ticks *store.TypedKeyValue[string, int64]
}

func (p *tickCounter) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	s, err := ctx.Store("ticks")
	if err != nil {
		return err
	}
	p.ticks = store.NewTypedKeyValue(s.(store.KeyValue), serde.String(), serde.Int64())
	_, err = ctx.Schedule(20*time.Millisecond, topology.WallClockTime, func(now int64) error {
		key := strconv.Itoa(int(ctx.TaskID().Partition))
		n, _, err := p.ticks.Get(key)
		if err != nil {
			return err
		}
		n++
		if err := p.ticks.Put(key, n); err != nil {
			return err
		}
		return ctx.Forward(topology.Record[string, string]{Key: key, Value: strconv.FormatInt(n, 10), Timestamp: now})
	})
	return err
}
func (p *tickCounter) Process(topology.Record[string, string]) error { return nil }
func (p *tickCounter) Close() error                                  { return nil }

func buildTicks(app, in, out string) (*topology.Topology, error) {
	b := topology.NewBuilder(app)
	b.AddStore(store.Spec{Name: "ticks", Kind: store.KindKeyValue, Logged: true})
	b.Stream(in, serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] { return &tickCounter{} },
			topology.Named("ticker"), topology.WithStores("ticks")).
		To(out)
	return b.Build()
}

// A wall-clock punctuator's store writes and outputs commit in the task's
// transaction, exactly once: the service is SIGKILLed (and kills itself
// between commit and apply, and just before EndTxn) while its punctuators
// tick and input arrives, and each partition's committed ticks must read
// 1, 2, 3, ... with no number repeated or skipped. An output committed
// without its store write would repeat a number after the restart; a store
// write committed without its output would skip one.
func TestPunctuatorOutputIsExactlyOnceUnderCrashes(t *testing.T) {
	t.Parallel()
	const partitions = 2
	in, out := kafkatestNewTopic(t, partitions), kafkatestNewTopic(t, partitions)
	appID := kafkatestName(t, "ticks")
	env := []string{"TIDEMARK_TEST_CHILD=1", "CHILD_APP=" + appID, "CHILD_IN=" + in, "CHILD_OUT=" + out,
		"CHILD_BROKERS=" + brokers(t), "CHILD_STATE=" + t.TempDir(), "CHILD_TOPOLOGY=ticks", "CHILD_SELF_KILL=0.05"}
	seed := crashTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 13))
	produced := 0
	const kills = 3
	for round := range kills + 1 {
		childEnv := append(slices.Clone(env), "CHILD_SEED="+strconv.FormatUint(seed+uint64(round), 10))
		if round == kills {
			childEnv = append(childEnv, "CHILD_SELF_KILL=0")
		}
		c := startChild(t, childEnv)
		for range 3 {
			produceKeysN(t, in, produced, 100, 8, partitions)
			produced += 100
			time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		}
		if round < kills {
			c.kill()
			continue
		}
		time.Sleep(time.Second)
		c.terminate(t)
	}
	var got []*kgo.Record
	poll := committedPoller(t, out, &got)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for poll(ctx) {
	}
	ticks := map[string][]int64{}
	for _, r := range got {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Fatalf("tick %q: %v", r.Value, err)
		}
		ticks[string(r.Key)] = append(ticks[string(r.Key)], n)
	}
	for p := range partitions {
		key := strconv.Itoa(p)
		seq := ticks[key]
		if len(seq) == 0 {
			t.Errorf("partition %d: no committed ticks", p)
			continue
		}
		for i, n := range seq {
			if n != int64(i+1) {
				t.Errorf("partition %d: tick %d is %d, want %d (seed %d): %v", p, i, n, i+1, seed, around(seq, i))
				break
			}
		}
		t.Logf("partition %d: %d ticks committed", p, len(seq))
	}
}

// around is seq near index i, for a failure message.
func around(seq []int64, i int) string {
	lo, hi := max(0, i-3), min(len(seq), i+4)
	return fmt.Sprint(seq[lo:hi])
}
