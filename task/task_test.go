package task_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// collected is a Collector keeping copies, as the service's producer will.
type collected struct{ recs []string }

func (c *collected) Collect(id topology.TaskID, r *topology.OutputRecord) error {
	c.recs = append(c.recs, fmt.Sprintf("%s %s p%d %x=%x @%d in@%d st@%d", id, r.Topic, r.Partition, r.Key, r.Value, r.Timestamp, r.InputTimestamp, r.StreamTime))
	return nil
}

// durable is a Provider whose stores survive a task's Close, standing in
// for Badger: restarting a task on it models a restart with local state.
type durable struct {
	stores map[string]store.Store
}

type keep struct{ store.Store }

func (keep) Close() error { return nil }

type keepKV struct{ store.KeyValue }

func (keepKV) Close() error { return nil }

type keepWindow struct{ store.Window }

func (keepWindow) Close() error { return nil }

func (d *durable) Open(spec store.Spec, p int32) (store.Store, error) {
	key := fmt.Sprintf("%s/%d", spec.Name, p)
	if s, ok := d.stores[key]; ok {
		return s, nil
	}
	s, err := memstore.NewProvider().Open(spec, p)
	if err != nil {
		return nil, err
	}
	switch st := s.(type) {
	case store.KeyValue:
		s = keepKV{st}
	case store.Window:
		s = keepWindow{st}
	default:
		s = keep{s}
	}
	d.stores[key] = s
	return s, nil
}

func windowedTopology(t *testing.T) *topology.Topology {
	b := topology.NewBuilder("app")
	g := b.Stream("clicks", serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 0)).
		Count(topology.Named("per-window"), topology.EmitFinal()).ToStream().To("counts")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func record(topic string, p int32, off int64, k, v string, ts int64) *topology.InputRecord {
	return &topology.InputRecord{Topic: topic, Partition: p, Offset: off, Key: []byte(k), Value: []byte(v), Timestamp: ts}
}

func TestTaskSeam(t *testing.T) {
	topo := windowedTopology(t)
	out := &collected{}
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: 2, Stores: memstore.NewProvider(), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if tk.ID().String() != "0_2" || !slices.Equal(tk.Topics(), []string{"clicks"}) {
		t.Errorf("task %s reads %v, want 0_2 reading clicks", tk.ID(), tk.Topics())
	}
	var specs []string
	for _, s := range tk.Stores() {
		specs = append(specs, fmt.Sprintf("%s %s logged=%v size=%d", s.Spec.Name, s.Spec.Kind, s.Spec.Logged, s.Spec.WindowSize))
	}
	if want := []string{"per-window window logged=true size=10000", "per-window-EMIT-CURSOR key-value logged=true size=0"}; !slices.Equal(specs, want) {
		t.Errorf("stores = %v, want %v", specs, want)
	}

	if err := tk.Process(record("other", 2, 0, "k", "v", 1)); !errors.Is(err, task.ErrUnknownTopic) {
		t.Errorf("record of an unknown topic: err = %v, want ErrUnknownTopic", err)
	}
	if err := tk.Process(record("clicks", 1, 0, "k", "v", 1)); !errors.Is(err, task.ErrWrongPartition) {
		t.Errorf("record of another partition: err = %v, want ErrWrongPartition", err)
	}
	for i, ts := range []int64{1000, 9000, 10000} {
		if err := tk.Process(record("clicks", 2, int64(i), "k", "v", ts)); err != nil {
			t.Fatal(err)
		}
	}
	if tk.StreamTime() != 10000 || tk.InputStreamTime("clicks") != 10000 {
		t.Errorf("stream time %d, input stream time %d, want 10000", tk.StreamTime(), tk.InputStreamTime("clicks"))
	}
	// Window [0,10000) closed at stream time 10000: one final result, its
	// key k and start 0 as Kafka Streams' TimeWindowedSerializer writes
	// them, in the partition of k (of 1), as its WindowedStreamPartitioner
	// chooses.
	if want := []string{"0_2 counts p0 6b0000000000000000=0000000000000002 @9000 in@10000 st@10000"}; !slices.Equal(out.recs, want) {
		t.Errorf("outputs %v, want %v", out.recs, want)
	}
	if m := tk.Metrics(); m.Processed != 3 || m.Emitted != 1 {
		t.Errorf("metrics %+v, want 3 processed, 1 emitted", m)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tk.Process(record("clicks", 2, 3, "k", "v", 1)); !errors.Is(err, task.ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrTaskClosed", err)
	}
}

func TestEmitFinalDoesNotRepeatResultsAfterRestart(t *testing.T) {
	topo := windowedTopology(t)
	provider := &durable{stores: map[string]store.Store{}}
	run := func(records ...*topology.InputRecord) []string {
		out := &collected{}
		tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Stores: provider, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Close()
		for _, r := range records {
			if err := tk.Process(r); err != nil {
				t.Fatal(err)
			}
		}
		return out.recs
	}
	first := run(record("clicks", 0, 0, "k", "v", 1000), record("clicks", 0, 1, "k", "v", 12000))
	if len(first) != 1 {
		t.Fatalf("first run emitted %v, want the final count of [0,10000)", first)
	}
	// After a restart with the same local state, the cursor store says
	// [0,10000) was emitted; only [10000,20000) closes now.
	second := run(record("clicks", 0, 2, "k", "v", 25000))
	if len(second) != 1 || second[0] == first[0] {
		t.Errorf("after restart emitted %v, want only [10000,20000)'s result", second)
	}
}

func TestWallClockPunctuationNeverGoesBack(t *testing.T) {
	var fired []int64
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).Process(func() topology.Processor[string, string, string, string] {
		return &ticker{fired: &fired}
	}).WithSerdes(serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.New(task.Params{Topology: topo, Stores: memstore.NewProvider(), Output: &collected{}, WallClock: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	for _, now := range []int64{1500, 2000, 1000, 2999, 6500} {
		if err := tk.Punctuate(now); err != nil {
			t.Fatal(err)
		}
	}
	// Scheduled at 1000 every 1s: due 2000, then 3000 (2999 is early, 1000
	// does not rewind), then 6500 fires once and the next is 7000.
	if !slices.Equal(fired, []int64{2000, 6500}) {
		t.Errorf("fired at %v, want [2000 6500]", fired)
	}
}

type ticker struct {
	fired *[]int64
}

func (p *ticker) Init(ctx topology.ProcessorContext[string, string]) error {
	_, err := ctx.Schedule(time.Second, topology.WallClockTime, func(ts int64) error {
		*p.fired = append(*p.fired, ts)
		return nil
	})
	return err
}
func (p *ticker) Process(topology.Record[string, string]) error { return nil }
func (p *ticker) Close() error                                  { return nil }

// TestTaskResumesStreamTime: a task given the stream time its inputs had
// at the last commit drops what was late then, as the task before it did.
func TestTaskResumesStreamTime(t *testing.T) {
	for _, c := range []struct {
		name    string
		resume  task.Clocks
		outputs int
	}{{"from -1", task.Clocks{}, 1}, {"resumed", task.Clocks{
		Inputs: map[string]int64{"clicks": 100_000}, Operators: map[string]int64{"per-window": 100_000}}, 0}} {
		t.Run(c.name, func(t *testing.T) {
			out := &collected{}
			tk, err := task.New(task.Params{Topology: windowedTopology(t), SubTopology: 0, Partition: 0,
				Stores: memstore.NewProvider(), Output: out, Resume: c.resume})
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Close()
			if want, ok := c.resume.Inputs["clicks"]; ok && (tk.StreamTime() != want || tk.InputStreamTime("clicks") != want) {
				t.Fatalf("stream time %d / %d, want %d", tk.StreamTime(), tk.InputStreamTime("clicks"), want)
			}
			// 1 s and then 10 s: window [0,10s) closes at 10 s and emits
			// its count unless 1 s was already late.
			for i, ts := range []int64{1000, 110_000} {
				if err := tk.Process(record("clicks", 0, int64(i), "k", "v", ts)); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			for _, r := range out.recs {
				if len(r) > 0 && strings.Contains(r, " 6b0000000000000000=0000000000000001 ") {
					n++
				}
			}
			if n != c.outputs {
				t.Fatalf("window [0,10s) emitted %d results, want %d: %v", n, c.outputs, out.recs)
			}
			// What the next commit stores for the task after this one.
			got := tk.Clocks()
			if got.Inputs["clicks"] != 110_000 || got.Operators["per-window"] != 110_000 {
				t.Fatalf("clocks %+v, want input clicks and operator per-window at 110000", got)
			}
		})
	}
}
