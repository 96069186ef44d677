package topology_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// forward passes records on: an operator whose downstream fails.
type forward struct {
	ctx topology.ProcessorContext[string, int64]
}

func (p *forward) Init(ctx topology.ProcessorContext[string, int64]) error { p.ctx = ctx; return nil }
func (p *forward) Close() error                                            { return nil }
func (p *forward) Process(r topology.Record[string, int64]) error          { return p.ctx.Forward(r) }

// An operator's error names it to the runtime's error handlers
// (processor.ErrorContext.Operator, the tidemark.operator dead-letter
// header): the one that failed, not those that forwarded to it.
func TestOperatorErrorsNameTheFailingOperator(t *testing.T) {
	picky := serde.Func[int64]{
		EncodeFunc: func(dst []byte, v int64) ([]byte, error) {
			if v < 0 {
				return dst, errors.New("picky: negative")
			}
			return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
		},
		DecodeFunc: serde.Int64().Decode,
	}
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.Int64()).
		Process(func() topology.Processor[string, int64, string, int64] { return &forward{} }, topology.Named("pass-on")).
		WithSerdes(serde.String(), picky).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = tidemarktest.Input(d, "in", serde.String(), serde.Int64()).Pipe("k", -1, 1)
	oe, ok := errors.AsType[interface {
		error
		OperatorName() string
	}](err)
	if !ok || !strings.Contains(oe.OperatorName(), "SINK") {
		t.Fatalf("error %v: operator %v, want the sink that failed to encode", err, oe)
	}
}
