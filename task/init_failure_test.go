package task_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// lifecycle logs its Init and Close; failInit makes Init fail.
type lifecycle struct {
	name     string
	failInit bool
	log      *[]string
}

func (p *lifecycle) Init(topology.ProcessorContext[string, string]) error {
	*p.log = append(*p.log, "init "+p.name)
	if p.failInit {
		return errors.New("init failed")
	}
	return nil
}
func (p *lifecycle) Process(topology.Record[string, string]) error { return nil }
func (p *lifecycle) Close() error {
	*p.log = append(*p.log, "close "+p.name)
	return nil
}

// A processor whose Init fails fails the task, and the processors
// initialized before it are closed: what their Init acquired (a
// goroutine, a client, a file) is released. Before, task.New returned the
// error and only closed the stores, so every failed attempt to create the
// task (a rebalance, a restart after an abort) leaked them.
func TestFailedInitClosesTheProcessorsInitializedBefore(t *testing.T) {
	var log []string
	proc := func(name string, fail bool) func() topology.Processor[string, string, string, string] {
		return func() topology.Processor[string, string, string, string] {
			return &lifecycle{name: name, failInit: fail, log: &log}
		}
	}
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).
		Process(proc("first", false), topology.Named("first")).
		Process(proc("second", true), topology.Named("second")).
		Process(proc("third", false), topology.Named("third")).
		To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.New(task.Params{Topology: topo, Stores: memstore.NewProvider(), Output: &collected{}})
	if err == nil {
		t.Fatal("task.New succeeded with a failing Init")
	}
	if want := []string{"init first", "init second", "close first"}; !slices.Equal(log, want) {
		t.Errorf("lifecycle %v, want %v (err %v)", log, want, err)
	}
}
