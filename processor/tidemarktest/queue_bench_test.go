package tidemarktest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ackProducer acknowledges every changelog record at the next offset of
// its partition, as a broker would, without sending it anywhere.
type ackProducer struct{ next map[string]int64 }

func (p *ackProducer) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	r.Offset = p.next[r.Topic]
	p.next[r.Topic]++
	promise(r, nil)
}

// BenchmarkTimeQueuesOnBadger runs the operators that keep a time-ordered
// queue in a key-value store (an outer join's unjoined records, a
// suppress buffer, final session results, dedup ids, TTL rows) on the
// service's Badger stores, committing every 500 records. Every record
// makes something due and deletes it; the deletes stay in Badger as
// tombstones until compaction, so a scan from the start of the queue costs
// more per record the longer the operator runs. After `before` records,
// the cost per record should be what it is on a fresh store.
func BenchmarkTimeQueuesOnBadger(b *testing.B) {
	str := serde.String()
	cases := []benchCase{
		{"outer-join", func(tb *topology.Builder) {
			l := tb.Stream("l", str, str)
			r := tb.Stream("r", str, str)
			l.OuterJoin(r, func(_ string, lv string, _ bool, rv string, _ bool) string { return lv + rv },
				topology.JoinWindowsOf(time.Second, 0), topology.Named("j")).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			l := tidemarktest.Input(d, "l", str, str)
			return func(i int) error { return l.Pipe(fmt.Sprint(i), "v", int64(i)*10) }
		}},
		// A left join waiting a minute for its right record, as the
		// marketplace's ship deadline does: 6,000 records pending.
		{"left-join-within", func(tb *topology.Builder) {
			l := tb.Stream("l", str, str)
			r := tb.Stream("r", str, str)
			l.LeftJoin(r, func(_ string, lv string, rv string, _ bool) string { return lv + rv },
				topology.JoinWindowsOf(time.Minute, 0).Before(0), topology.Named("j")).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			l := tidemarktest.Input(d, "l", str, str)
			return func(i int) error { return l.Pipe(fmt.Sprint(i), "v", int64(i)*10) }
		}},
		{"suppress", func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t")).
				Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{}), topology.Named("sup")).
				ToStream().To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			return func(i int) error { return in.Pipe(fmt.Sprint(i%5000), "v", int64(i)*10) }
		}},
		{"session-final", func(tb *topology.Builder) {
			g := tb.Stream("in", str, str).GroupByKey()
			topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(time.Second, 0)).
				Count(topology.Named("s"), topology.EmitFinal()).ToStream().To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			return func(i int) error { return in.Pipe(fmt.Sprint(i%5000), "v", int64(i)*10) }
		}},
		{"dedup", func(tb *topology.Builder) {
			tb.Stream("in", str, str).
				Deduplicate(func(_, v string) string { return v }, time.Second, topology.Named("d")).To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			return func(i int) error { return in.Pipe("k", fmt.Sprint(i), int64(i)*10) }
		}},
		{"ttl", func(tb *topology.Builder) {
			tb.Table("in", str, str, topology.Named("t"), topology.WithTTL(time.Second)).ToStream().To("out")
		}, func(d *tidemarktest.Driver) func(int) error {
			in := tidemarktest.Input(d, "in", str, str)
			return func(i int) error { return in.Pipe(fmt.Sprint(i), "v", int64(i)*10) }
		}},
	}
	runOnBadger(b, cases)
}

// benchCase is a topology and how to pipe its i-th record.
type benchCase struct {
	name  string
	build func(tb *topology.Builder)
	pipe  func(d *tidemarktest.Driver) func(i int) error
}

// runOnBadger runs each case on a fresh Badger store after 0, 20,000 and
// 60,000 records, committing every 500 records, and measures the cost of
// the records after those.
func runOnBadger(b *testing.B, cases []benchCase) {
	str := serde.String()
	for _, c := range cases {
		for _, before := range []int{0, 20000, 60000} {
			b.Run(fmt.Sprintf("%s/before=%d", c.name, before), func(b *testing.B) {
				db, err := changelog.OpenDB(b.TempDir(), changelog.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = db.Close() })
				task := db.NewTaskState(changelog.TaskStateConfig{AppID: "bench", Partition: 0, Producer: &ackProducer{next: map[string]int64{}}})
				tb := topology.NewBuilder("bench")
				c.build(tb)
				topo, err := tb.Build()
				if err != nil {
					b.Fatal(err)
				}
				d, err := tidemarktest.New(topo, tidemarktest.WithStoreProvider(task), tidemarktest.WithDefaultPartitions(1))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = d.Close() })
				out := tidemarktest.Output(d, "out", str, str)
				pipe := c.pipe(d)
				i := 0
				step := func() {
					if err := pipe(i); err != nil {
						b.Fatal(err)
					}
					i++
					if i%500 == 0 {
						offsets, err := task.Flush(context.Background())
						if err != nil {
							b.Fatal(err)
						}
						if err := task.Apply(offsets); err != nil {
							b.Fatal(err)
						}
						out.Discard()
					}
				}
				for range before {
					step()
				}
				b.ResetTimer()
				for b.Loop() {
					step()
				}
				reportRate(b)
			})
		}
	}
}
