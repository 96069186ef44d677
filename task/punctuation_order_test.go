package task_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// twoPunctuators schedules a slow punctuator first and a fast one second,
// both on one clock, and logs each firing.
type twoPunctuators struct {
	typ topology.PunctuationType
	log *[]string
}

func (p *twoPunctuators) Init(ctx topology.ProcessorContext[string, string]) error {
	for _, s := range []struct {
		name     string
		interval time.Duration
	}{{"slow", 10 * time.Second}, {"fast", 3 * time.Second}} {
		if _, err := ctx.Schedule(s.interval, p.typ, func(ts int64) error {
			*p.log = append(*p.log, fmt.Sprintf("%s@%d", s.name, ts))
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
func (p *twoPunctuators) Process(topology.Record[string, string]) error { return nil }
func (p *twoPunctuators) Close() error                                  { return nil }

// Punctuators due at once fire in the order of their due times, as Kafka
// Streams' PunctuationQueue (a priority queue on the due time) fires them,
// not in the order they were scheduled: two punctuators of one processor
// (flush every 3 s, expire every 10 s, say) see each other's effects in
// the same order as under Kafka Streams. Fired in schedule order, the slow
// one, due later, ran first.
func TestDuePunctuatorsFireInDueTimeOrder(t *testing.T) {
	for _, typ := range []topology.PunctuationType{topology.StreamTime, topology.WallClockTime} {
		t.Run(typ.String(), func(t *testing.T) {
			var log []string
			b := topology.NewBuilder("app")
			b.Stream("in", serde.String(), serde.String()).Process(func() topology.Processor[string, string, string, string] {
				return &twoPunctuators{typ: typ, log: &log}
			}).To("out")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			tk, err := task.New(task.Params{Topology: topo, Stores: memstore.NewProvider(), Output: &collected{}, WallClock: 0})
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Close()
			advance := func(now int64) {
				t.Helper()
				if typ == topology.WallClockTime {
					err = tk.Punctuate(now)
				} else {
					err = tk.Process(record("in", 0, 0, "k", "v", now))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			if typ == topology.StreamTime {
				// Both start due at 0: the first record fires them, in
				// schedule order (a tie).
				advance(0)
				want = []string{"slow@0", "fast@0"}
			}
			// A jump past both: fast (due at 3 s) before slow (due at 10 s).
			advance(12_000)
			want = append(want, "fast@12000", "slow@12000")
			// fast is due at 15 s, slow at 20 s.
			advance(21_000)
			want = append(want, "fast@21000", "slow@21000")
			if !slices.Equal(log, want) {
				t.Errorf("fired %v, want %v", log, want)
			}
		})
	}
}
