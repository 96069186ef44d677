package topology_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

func TestSuppressDeclaresALoggedStore(t *testing.T) {
	str := serde.String()
	b := topology.NewBuilder("app")
	b.Table("in", str, str, topology.Named("stock")).
		Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{MaxRecords: 10}), topology.Named("stock-1s")).
		ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `Topologies:
   Sub-topology: 0
    Source: in-SOURCE (topics: [in])
      --> stock
    Processor: stock (stores: [stock])
      --> stock-1s
      <-- in-SOURCE
    Processor: stock-1s (stores: [stock-1s])
      --> stock-1s-TOSTREAM-1
      <-- stock
    Processor: stock-1s-TOSTREAM-1 (stores: [])
      --> stock-1s-SINK-2
      <-- stock-1s
    Sink: stock-1s-SINK-2 (topic: out)
      <-- stock-1s-TOSTREAM-1

`
	if got := topo.String(); got != want {
		t.Errorf("describe:\n%s\nwant:\n%s", got, want)
	}
	info, ok := topo.Store("stock-1s")
	if !ok || info.Changelog != "app-stock-1s-changelog" || info.Spec.Kind != store.KindKeyValue {
		t.Errorf("store info %+v %v, want key-value store stock-1s logged to app-stock-1s-changelog", info, ok)
	}
}

func TestSuppressRejectsBadConfigs(t *testing.T) {
	str := serde.String()
	tests := []struct {
		name string
		s    topology.Suppression
		opts []topology.BuilderOption
		want error
		in   string
	}{
		{"negative limit", topology.UntilTimeLimit(-time.Second, topology.BufferConfig{}), nil, topology.ErrInvalidTopology, "time limit -1s"},
		{"sub-millisecond limit", topology.UntilTimeLimit(time.Microsecond, topology.BufferConfig{}), nil, topology.ErrInvalidTopology, "at least 1ms"},
		{"negative bound", topology.UntilTimeLimit(time.Second, topology.BufferConfig{MaxBytes: -1}), nil, topology.ErrInvalidTopology, "must not be negative"},
		{"zero suppression", topology.Suppression{}, nil, topology.ErrInvalidTopology, "UntilTimeLimit"},
		{"unnamed under RequireNamedState", topology.UntilTimeLimit(0, topology.BufferConfig{}), []topology.BuilderOption{topology.RequireNamedState()},
			topology.ErrInvalidTopology, "t-SUPPRESS-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := topology.NewBuilder("app", tt.opts...)
			b.Table("in", str, str, topology.Named("t")).Suppress(tt.s).ToStream().To("out")
			if _, err := b.Build(); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("Build error %v, want %v mentioning %q", err, tt.want, tt.in)
			}
		})
	}
	b := topology.NewBuilder("app")
	b.Table("in", str, str, topology.Named("t")).MapValues(func(_, v string) int { return len(v) }).
		Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{}), topology.Named("s")).ToStream().To("out")
	if _, err := b.Build(); !errors.Is(err, topology.ErrMissingSerde) {
		t.Errorf("no value serde: Build error %v, want ErrMissingSerde", err)
	}
}

// Suppress delays records: its output is bounded by its input and by the
// smallest timestamp it still buffers (the held clock).
func TestSuppressOutputBound(t *testing.T) {
	str := serde.String()
	b := topology.NewBuilder("app", topology.WithAllowedLateness(time.Second))
	b.Table("in", str, str, topology.Named("t")).
		Suppress(topology.UntilTimeLimit(time.Minute, topology.BufferConfig{}), topology.Named("s")).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	bs, err := topo.OutputBounds(0)
	if err != nil {
		t.Fatal(err)
	}
	bound := bs.Sinks["out"]
	if got, want := bound.String(), "min(input(in), held(s/held))"; got != want {
		t.Errorf("bound %s, want %s", got, want)
	}
	if want := []string{"s", "s/held"}; strings.Join(bs.Clocks, ",") != strings.Join(want, ",") {
		t.Errorf("clocks %v, want %v", bs.Clocks, want)
	}
	tests := []struct {
		name     string
		e        env
		want     int64
		wantIdle bool
	}{
		{"nothing buffered: the input's", env{inputs: map[string]int64{"in": 9000}, clocks: map[string]int64{"s/held": math.MaxInt64}}, 7999, false},
		{"a buffered timestamp below it holds it back", env{inputs: map[string]int64{"in": 9000}, clocks: map[string]int64{"s/held": 5000}}, 4999, false},
		{"a buffered timestamp above it does not", env{inputs: map[string]int64{"in": 9000}, clocks: map[string]int64{"s/held": 8500}}, 7999, false},
		{"buffer not counted yet (after a restore): no claim", env{inputs: map[string]int64{"in": 9000}}, math.MinInt64, false},
		{"idle input, nothing buffered: idle, the input's", env{inputs: map[string]int64{"in": 9000}, idle: map[string]bool{"in": true}, clocks: map[string]int64{"s/held": math.MaxInt64}}, 8000, true},
		{"idle input, something buffered: held", env{inputs: map[string]int64{"in": 9000}, idle: map[string]bool{"in": true}, clocks: map[string]int64{"s/held": 3000}}, 2999, false},
	}
	for _, tt := range tests {
		if got, idle := bound.Eval(tt.e); got != tt.want || idle != tt.wantIdle {
			t.Errorf("%s: Eval = %d idle=%v, want %d idle=%v", tt.name, got, idle, tt.want, tt.wantIdle)
		}
	}
}
