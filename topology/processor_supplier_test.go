package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

type keepCtx struct {
	ctx topology.ProcessorContext[string, string]
}

func (p *keepCtx) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	return nil
}
func (p *keepCtx) Process(r topology.Record[string, string]) error { return p.ctx.Forward(r) }
func (p *keepCtx) Close() error                                    { return nil }

type stateless struct{}

func (stateless) Init(topology.ProcessorContext[string, string]) error { return nil }
func (stateless) Process(topology.Record[string, string]) error        { return nil }
func (stateless) Close() error                                         { return nil }

// A processor supplier must return a new instance per call, one per task:
// a shared instance keeps the context (and stores) of the task that called
// Init last, so the other tasks' records are forwarded, and their state
// written, as that task's. Kafka Streams refuses such a supplier when the
// topology is built (ApiUtils.checkSupplier); Build now does too. Before,
// it built and the tasks silently shared one instance.
func TestBuildRefusesAProcessorSupplierReturningOneInstance(t *testing.T) {
	shared := &keepCtx{}
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] { return shared }, topology.Named("p")).
		To("out")
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalidTopology) || !strings.Contains(err.Error(), `"p"`) {
		t.Fatalf("Build = %v, want ErrInvalidTopology naming operator p", err)
	}

	// New instances, and pointers to zero-size types (which Go may give
	// one address), are fine.
	for name, supplier := range map[string]func() topology.Processor[string, string, string, string]{
		"new instance": func() topology.Processor[string, string, string, string] { return &keepCtx{} },
		"zero size":    func() topology.Processor[string, string, string, string] { return &stateless{} },
		"value":        func() topology.Processor[string, string, string, string] { return stateless{} },
	} {
		b := topology.NewBuilder("app")
		b.Stream("in", serde.String(), serde.String()).Process(supplier).To("out")
		if _, err := b.Build(); err != nil {
			t.Errorf("%s: Build = %v", name, err)
		}
	}
}
