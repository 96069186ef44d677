package task_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// raw keeps copies of the output records themselves, to feed them on.
type raw struct{ recs []topology.OutputRecord }

func (c *raw) Collect(_ topology.TaskID, r *topology.OutputRecord) error {
	cp := *r
	cp.Key, cp.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	cp.Headers = slices.Clone(r.Headers)
	c.recs = append(c.recs, cp)
	return nil
}

func (c *raw) take() []topology.OutputRecord {
	out := c.recs
	c.recs = nil
	return out
}

func counts(recs []topology.OutputRecord) []string {
	var out []string
	for _, r := range recs {
		n := "<nil>"
		if r.Value != nil {
			n = strconv.FormatInt(int64(binary.BigEndian.Uint64(r.Value)), 10)
		}
		out = append(out, fmt.Sprintf("%s=%s @%d in@%d", r.Key, n, r.Timestamp, r.InputTimestamp))
	}
	return out
}

func newTask(t *testing.T, topo *topology.Topology, sub int, out task.Collector) *task.Task {
	t.Helper()
	tk, err := task.New(task.Params{Topology: topo, SubTopology: sub, Stores: memstore.NewProvider(), Output: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

func process(t *testing.T, tk *task.Task, topic string, recs ...[2]string) {
	t.Helper()
	for _, r := range recs {
		ts, _ := strconv.ParseInt(r[1], 10, 64)
		if err := tk.Process(&topology.InputRecord{Topic: topic, Key: []byte(r[0]), Value: []byte("x"), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
}

// A cached count forwards nothing until Flush, then each key's latest
// count once, in the order keys were first updated, in the context (event
// time, input timestamp) of the record that made it; a key beyond the
// cache's room pushes the oldest out early.
func TestRecordCacheForwardsLatestPerKeyAtFlush(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Stream("clicks", serde.String(), serde.String()).GroupByKey().
		Count(topology.Named("counts"), topology.WithRecordCache(2)).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	out := &raw{}
	tk := newTask(t, topo, 0, out)
	process(t, tk, "clicks", [2]string{"u1", "1000"}, [2]string{"u2", "2000"}, [2]string{"u1", "3000"})
	if got := out.take(); len(got) != 0 {
		t.Fatalf("forwarded before the flush: %v", counts(got))
	}
	// The runtime's controller must count them as pending outputs.
	if n, _ := tk.TakeHeld(); n != 3 {
		t.Fatalf("TakeHeld = %d after three held updates, want 3", n)
	}
	if n, _ := tk.TakeHeld(); n != 0 {
		t.Fatalf("TakeHeld = %d a second time, want 0", n)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(out.take()), []string{"u1=2 @3000 in@3000", "u2=1 @2000 in@2000"}; !slices.Equal(got, want) {
		t.Fatalf("flushed %v, want %v", got, want)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.take(); len(got) != 0 {
		t.Fatalf("a second flush forwarded %v again", counts(got))
	}

	process(t, tk, "clicks", [2]string{"u3", "4000"}, [2]string{"u1", "5000"}, [2]string{"u4", "6000"})
	if got, want := counts(out.take()), []string{"u3=1 @4000 in@4000"}; !slices.Equal(got, want) {
		t.Fatalf("a third key in a cache of two forwarded %v, want the oldest pushed out: %v", got, want)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(out.take()), []string{"u1=3 @5000 in@5000", "u4=1 @6000 in@6000"}; !slices.Equal(got, want) {
		t.Fatalf("flushed %v, want %v", got, want)
	}
}

// A table aggregation downstream of a cached one subtracts what it was
// last sent and adds the latest: the held change keeps the oldest old
// value. Users per count: u1 clicks three times, u2 once, in one flush;
// then u2 once more. Were the old value the last update's (2 for u1),
// bucket 2 would go to -1.
func TestRecordCacheKeepsTheOldValueDownstreamLastSaw(t *testing.T) {
	b := topology.NewBuilder("app")
	perUser := b.Stream("clicks", serde.String(), serde.String()).GroupByKey().
		Count(topology.Named("per-user"), topology.WithRecordCache(100))
	perUser.GroupBy(func(u string, n int64) (string, string) { return strconv.FormatInt(n, 10), u },
		serde.String(), serde.String(), topology.Named("by-count")).
		Count(topology.Named("users-per-count")).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rep := &raw{}
	users := newTask(t, topo, 0, rep)
	out := &raw{}
	buckets := newTask(t, topo, 1, out)
	feed := func() {
		for i, r := range rep.take() {
			in := &topology.InputRecord{Topic: r.Topic, Offset: int64(i), Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers}
			if err := buckets.Process(in); err != nil {
				t.Fatal(err)
			}
		}
	}
	final := map[string]string{}
	last := func() map[string]string {
		for _, r := range out.take() {
			final[string(r.Key)] = strconv.FormatInt(int64(binary.BigEndian.Uint64(r.Value)), 10)
		}
		return final
	}

	process(t, users, "clicks", [2]string{"u1", "1"}, [2]string{"u1", "2"}, [2]string{"u2", "3"}, [2]string{"u1", "4"})
	if err := users.Flush(); err != nil {
		t.Fatal(err)
	}
	feed()
	if got := last(); len(got) != 2 || got["3"] != "1" || got["1"] != "1" {
		t.Fatalf("users per count %v, want 3:1 1:1", got)
	}
	process(t, users, "clicks", [2]string{"u2", "5"})
	if err := users.Flush(); err != nil {
		t.Fatal(err)
	}
	feed()
	if got := last(); got["1"] != "0" || got["2"] != "1" || got["3"] != "1" {
		t.Fatalf("users per count %v, want 1:0 2:1 3:1", got)
	}
}

func TestRecordCacheBuildErrors(t *testing.T) {
	for name, build := range map[string]func(b *topology.Builder){
		"no room": func(b *topology.Builder) {
			b.Stream("in", serde.String(), serde.String()).GroupByKey().Count(topology.WithRecordCache(0))
		},
		"a table from a topic": func(b *topology.Builder) {
			b.Table("in", serde.String(), serde.String(), topology.WithRecordCache(10))
		},
		"a windowed aggregation": func(b *topology.Builder) {
			g := b.Stream("in", serde.String(), serde.String()).GroupByKey()
			topology.WindowedBy(g, topology.TumblingWindows(time.Second, 0)).Count(topology.WithRecordCache(10))
		},
	} {
		b := topology.NewBuilder("app")
		build(b)
		if _, err := b.Build(); !errors.Is(err, topology.ErrInvalidTopology) {
			t.Errorf("%s: Build error %v, want ErrInvalidTopology", name, err)
		}
	}
}
