package topology_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// env is a BoundEnv of fixed input times, idle inputs and clocks.
type env struct {
	inputs map[string]int64
	idle   map[string]bool
	clocks map[string]int64
}

func (e env) InputTime(topic string) (int64, bool) {
	st, ok := e.inputs[topic]
	if !ok {
		st = -1
	}
	return st, e.idle[topic]
}

func (e env) OperatorClock(name string) int64 {
	if c, ok := e.clocks[name]; ok {
		return c
	}
	return -1
}

func TestOutputBoundsFollowTheGraph(t *testing.T) {
	str := serde.String()
	tests := []struct {
		name   string
		build  func(b *topology.Builder)
		sub    int
		sink   string
		bound  string
		clocks []string
	}{
		{"stateless chain", func(b *topology.Builder) {
			b.Stream("in", str, str).Filter(func(_, _ string) bool { return true }).To("out")
		}, 0, "out", "input(in)", nil},
		{"deduplicate: stateful, but bounded by its input like a filter, no clock", func(b *topology.Builder) {
			b.Stream("in", str, str).Deduplicate(func(_, v string) string { return v }, time.Hour, topology.Named("d")).To("out")
		}, 0, "out", "input(in)", nil},
		{"merge of two inputs, and a source reading two topics", func(b *topology.Builder) {
			b.Stream("a", str, str).Merge(b.StreamOf([]string{"b", "c"}, str, str)).To("out")
		}, 0, "out", "min(input(a), input(b), input(c))", nil},
		{"tumbling window, emit-final", func(b *topology.Builder) {
			g := b.Stream("in", str, str).GroupByKey()
			topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 5*time.Second)).
				Count(topology.Named("w"), topology.EmitFinal()).ToStream().To("out")
		}, 0, "out", "window(w size=10000 advance=10000 grace=5000)", []string{"w"}},
		{"eager session: bounded by its input", func(b *topology.Builder) {
			g := b.Stream("in", str, str).GroupByKey()
			topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(time.Second, 0)).
				Count(topology.Named("s")).ToStream().To("out")
		}, 0, "out", "session-eager(gap=1000, input(in))", []string{"s"}},
		{"sliding window", func(b *topology.Builder) {
			g := b.Stream("in", str, str).GroupByKey()
			topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(time.Second, 2*time.Second)).
				Count(topology.Named("sl")).ToStream().To("out")
		}, 0, "out", "sliding(sl diff=1000 grace=2000)", []string{"sl"}},
		{"inner join and a second sink on the left input", func(b *topology.Builder) {
			l := b.Stream("l", str, str)
			l.To("raw")
			l.Join(b.Stream("r", str, str), func(_, a, c string) string { return a + c },
				topology.JoinWindowsOf(time.Second, 0), topology.Named("j")).To("out")
		}, 0, "out", "min(join(j-other reach=2000 grace=0, input(l)), join(j-this reach=2000 grace=0, input(r)))", []string{"j", "j-other", "j-this"}},
		{"repartition: the downstream task reads the repartition topic", func(b *topology.Builder) {
			b.Stream("in", str, str).SelectKey(func(_, v string) string { return v }).
				GroupByKey(topology.Named("by-value")).Count(topology.Named("c")).ToStream().To("out")
		}, 1, "out", "input(app-by-value-repartition)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			tt.build(b)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			bs, err := topo.OutputBounds(tt.sub)
			if err != nil {
				t.Fatal(err)
			}
			if got := bs.Sinks[tt.sink].String(); got != tt.bound {
				t.Errorf("bound of %s = %s, want %s", tt.sink, got, tt.bound)
			}
			if !slices.Equal(bs.Clocks, tt.clocks) {
				t.Errorf("clocks %v, want %v", bs.Clocks, tt.clocks)
			}
		})
	}
}

func TestOutputBoundEval(t *testing.T) {
	b := topology.NewBuilder("app", topology.WithAllowedLateness(time.Second))
	b.Stream("a", serde.String(), serde.String()).Merge(b.Stream("b", serde.String(), serde.String())).To("out")
	g := b.Stream("w", serde.String(), serde.String()).GroupByKey()
	topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(time.Second, 0)).Count(topology.Named("s")).ToStream().To("sess")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(sub int) topology.SubTopologyBounds {
		bs, err := topo.OutputBounds(sub)
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
	merge := bounds(0).Sinks["out"]
	tests := []struct {
		name     string
		e        env
		want     int64
		wantIdle bool
	}{
		{"an input without a record holds it at nothing", env{inputs: map[string]int64{"a": 5000}}, math.MinInt64, false},
		{"the slower input, less the allowed lateness, less one (a record yet to come may carry the bound itself)", env{inputs: map[string]int64{"a": 5000, "b": 3000}}, 1999, false},
		{"an idle input does not hold it back", env{inputs: map[string]int64{"a": 5000}, idle: map[string]bool{"b": true}}, 3999, false},
		{"all inputs idle: the task's own progress, flagged idle", env{inputs: map[string]int64{"a": 5000, "b": 3000}, idle: map[string]bool{"a": true, "b": true}}, 2000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, idle := merge.Eval(tt.e); got != tt.want || idle != tt.wantIdle {
				t.Fatalf("Eval = %d idle=%v, want %d idle=%v", got, idle, tt.want, tt.wantIdle)
			}
		})
	}
	allIdle := env{inputs: map[string]int64{"a": 5000, "b": 3000}, idle: map[string]bool{"a": true, "b": true}}
	if got := merge.Following(allIdle, 9000); got != 9000 {
		t.Fatalf("Following(9000) = %d, want 9000", got)
	}
	sess := bounds(1).Sinks["sess"]
	if got := sess.Following(env{idle: map[string]bool{"w": true}}, 9000); got != 8000 {
		t.Fatalf("eager session Following(9000) = %d, want 9000 − gap", got)
	}
	if got, idle := sess.Eval(env{inputs: map[string]int64{"w": 9000}}); got != 6999 || idle {
		t.Fatalf("eager session Eval = %d %v, want 9000 − lateness − 1 − gap", got, idle)
	}
	if _, err := topo.OutputBounds(7); err == nil || !strings.Contains(err.Error(), "sub-topology 7") {
		t.Fatalf("OutputBounds(7): %v", err)
	}
}
