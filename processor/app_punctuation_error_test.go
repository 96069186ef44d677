package processor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// failingPunctuator forwards every record, and schedules a punctuator
// that forwards a marker and then fails.
type failingPunctuator struct {
	ctx      topology.ProcessorContext[string, string]
	typ      topology.PunctuationType
	interval time.Duration
}

func (p *failingPunctuator) Init(ctx topology.ProcessorContext[string, string]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(p.interval, p.typ, func(at int64) error {
		if err := ctx.Forward(topology.Record[string, string]{Key: "punctuation", Value: fmt.Sprint(at), Timestamp: at}); err != nil {
			return err
		}
		return errors.New("punctuator failed")
	})
	return err
}
func (p *failingPunctuator) Process(r topology.Record[string, string]) error { return p.ctx.Forward(r) }
func (p *failingPunctuator) Close() error                                    { return nil }

func failingPunctuatorTopology(t *testing.T, in, out string, typ topology.PunctuationType, interval time.Duration) *topology.Topology {
	b := topology.NewBuilder(kafkatest.UniqueName(t, "punct"))
	b.Stream(in, serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, string] {
			return &failingPunctuator{typ: typ, interval: interval}
		}, topology.Named("p")).
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// produceSpaced produces n records 5 s of event time apart to partition 0.
func produceSpaced(t *testing.T, in string, n int) {
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i)),
			Timestamp: time.UnixMilli(int64(1_700_000_000_000 + i*5000))})
	}
	kafkatest.Produce(t, recs...)
}

// A punctuator that fails goes to the processing-error handler as a
// punctuation (Kafka Streams' KIP-1033), not as a failure of the record
// that made it due: with Continue every input record is processed once,
// what the punctuator forwarded before failing is kept, and the handler
// sees a punctuation context. Blamed on the record, a failing stream-time
// punctuator made Continue skip every record (the redo fired it again on
// the next one), and a wall-clock one stopped the application whatever
// the handler said.
func TestFailingPunctuatorGoesToTheHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		typ      topology.PunctuationType
		interval time.Duration
	}{
		{"stream time", topology.StreamTime, 10 * time.Second},
		{"wall clock", topology.WallClockTime, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
			topo := failingPunctuatorTopology(t, in, out, tc.typ, tc.interval)
			var mu sync.Mutex
			var seen []processor.ErrorContext
			handler := func(ectx processor.ErrorContext, err error) processor.ErrorAction {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, ectx)
				return processor.Continue
			}
			produceSpaced(t, in, 5)
			runApp(t, topo, processor.WithProcessingErrorHandler(handler), fixedCommits(100*time.Millisecond))
			got := kafkatest.ConsumeUntil(t, out, 30*time.Second, func(rs []*kgo.Record) bool {
				n, marks := 0, 0
				for _, r := range rs {
					if string(r.Key) == "punctuation" {
						marks++
					} else {
						n++
					}
				}
				return n >= 5 && marks >= 1
			})
			var keys []string
			for _, r := range got {
				if string(r.Key) != "punctuation" {
					keys = append(keys, string(r.Key))
				}
			}
			if want := []string{"k0", "k1", "k2", "k3", "k4"}; !slices.Equal(keys, want) {
				t.Errorf("input records out: %v, want each once: %v", keys, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the handler never heard of the failing punctuator")
			}
			for _, e := range seen {
				if !e.Punctuation || e.Offset != -1 || e.Topic != "" {
					t.Errorf("handler context %+v: want a punctuation (Punctuation set, no record)", e)
				}
			}
			t.Logf("%d outputs, handler called %d times", len(got), len(seen))
		})
	}
}

// With the default handler (Fail) a failing punctuator stops the
// application with its error.
func TestFailingPunctuatorStopsTheAppByDefault(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	topo := failingPunctuatorTopology(t, in, out, topology.StreamTime, 10*time.Second)
	produceSpaced(t, in, 2)
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "punctuator failed") {
		t.Fatalf("Run = %v (context %v), want it to stop with the punctuator's error", err, ctx.Err())
	}
}
