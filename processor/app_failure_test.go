package processor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// Helpers for the tests in app_*_test.go that need more control than
// runApp: commit cadence, runs that are expected to fail, offsets.

// fixedCommits commits every d and never early, so a test knows that no
// commit happens before d (or before shutdown).
func fixedCommits(d time.Duration) processor.Option {
	return processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: d})
}

// startApp runs an App whose Run result the test inspects.
func startApp(t *testing.T, topo *topology.Topology, opts ...processor.Option) (*processor.App, <-chan error) {
	t.Helper()
	app, err := processor.NewApp(topo, append([]processor.Option{processor.WithBrokers(kafkatest.Brokers(t)...),
		processor.WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- app.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Errorf("app did not stop within 30s")
		}
	})
	return app, done
}

// runError waits for Run to fail.
func runError(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil, want the failure")
		}
		return err
	case <-time.After(within):
		t.Fatalf("Run did not fail within %s", within)
		return nil
	}
}

// endOffsets is the high watermark of every partition of topic.
func endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := kafkatest.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitEndOffsets waits until topic holds at least n records (committed or
// not), that is, until an app has produced them into its transaction.
func waitEndOffsets(t *testing.T, topic string, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var sum int64
		for _, o := range endOffsets(t, topic) {
			sum += o
		}
		if sum >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d records after 15s, want %d", topic, sum, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireNoOpenTransaction checks that every partition of topic has its
// last stable offset at its end: no transaction left open holds
// read_committed consumers back (a failed app must abort, not abandon, its
// transaction, which would otherwise block its partitions until the
// transaction timeout).
func requireNoOpenTransaction(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kafkatest.Admin(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		end := endOffsets(t, topic)
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		open := ""
		lso.Each(func(o kadm.ListedOffset) {
			if o.Offset < end[o.Partition] {
				open += fmt.Sprintf(" %d: stable %d < end %d", o.Partition, o.Offset, end[o.Partition])
			}
		})
		if open == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has an open transaction 5s after the app stopped:%s", topic, open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// committedOffsets is what group has committed for topic.
func committedOffsets(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	return kafkatest.Committed(t, group, topic)
}

// int64Record is a record whose value is v as serde.Int64 writes it, or the
// 3-byte poison value "bad" for a nil v.
func int64Record(topic string, partition int32, key string, v *int64) *kgo.Record {
	b := []byte("bad")
	if v != nil {
		b, _ = serde.Int64().Encode(nil, *v)
	}
	return &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: b}
}

func ptr(v int64) *int64 { return &v }

// failOnPoisonRecord runs topo over in (2 partitions) with commits that
// never come by themselves, lets it put outputs of five good records of
// partition 0 into its open transaction, then feeds poison to partition 1
// and returns the error Run fails with. It checks what a failure must leave
// behind: no committed input offsets, no visible output, and no transaction
// left open on out.
func failOnPoisonRecord(t *testing.T, topo *topology.Topology, in, out string, poison *kgo.Record) error {
	t.Helper()
	var good []*kgo.Record
	for i := range 5 {
		good = append(good, int64Record(in, 0, fmt.Sprintf("k%d", i), ptr(int64(i))))
	}
	kafkatest.Produce(t, good...)
	_, done := startApp(t, topo, fixedCommits(time.Minute), processor.WithInstanceID("fail"))
	waitEndOffsets(t, out, 5)
	poison.Topic, poison.Partition = in, 1
	kafkatest.Produce(t, poison)
	err := runError(t, done, 15*time.Second)

	if got := committedOffsets(t, topo.Application(), in); len(got) != 0 {
		t.Fatalf("input offsets %v committed by a run that failed in its first transaction", got)
	}
	requireNoOpenTransaction(t, out)
	kafkatest.ConsumeExactly(t, out, 0, 5*time.Second, time.Second)
	return err
}

func TestUndecodableRecordWithoutDeadLetterTopicFailsRun(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).MapValues(func(_ string, v int64) int64 { return v * 10 }).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	err = failOnPoisonRecord(t, topo, in, out, int64Record("", 0, "poison", nil))
	if !errors.Is(err, topology.ErrDeserialize) || !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("Run: %v; want a deserialization error", err)
	}
	if at := fmt.Sprintf("%s/1@0", in); !strings.Contains(err.Error(), at) {
		t.Fatalf("Run: %v; want the record's coordinates %s", err, at)
	}
}

func TestPanicInUserCodeFailsRunNamingTaskAndRecord(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).MapValues(func(_ string, v int64) int64 {
		if v < 0 {
			panic(fmt.Sprintf("negative quantity %d", v))
		}
		return v * 10
	}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	err = failOnPoisonRecord(t, topo, in, out, int64Record("", 0, "boom", ptr(-7)))
	for _, want := range []string{"task 0_1", fmt.Sprintf("%s/1@0", in), "panicked", "negative quantity -7"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run: %.300s; want it to name %q", err, want)
		}
	}
}

// panicky forwards its records and panics in its wall-clock punctuator once
// it has forwarded one, with that output in the open transaction.
type panicky struct {
	ctx  topology.ProcessorContext[string, int64]
	seen int
}

func (p *panicky) Init(ctx topology.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	_, err := ctx.Schedule(20*time.Millisecond, topology.WallClockTime, func(int64) error {
		if p.seen > 0 {
			panic("punctuator bug")
		}
		return nil
	})
	return err
}

func (p *panicky) Process(r topology.Record[string, int64]) error {
	p.seen++
	return p.ctx.Forward(r)
}

func (p *panicky) Close() error { return nil }

func TestPanicInPunctuatorFailsRunNamingTask(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).
		Process(func() topology.Processor[string, int64, string, int64] { return &panicky{} }).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, int64Record(in, 0, "a", ptr(1)))
	_, done := startApp(t, topo, fixedCommits(time.Minute))
	err = runError(t, done, 15*time.Second)
	for _, want := range []string{"task 0_0", "panicked", "punctuator bug"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run: %.300s; want it to name %q", err, want)
		}
	}
	requireNoOpenTransaction(t, out)
	kafkatest.ConsumeExactly(t, out, 0, 5*time.Second, time.Second)
}
