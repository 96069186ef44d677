package processor_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// failNegative forwards its records and fails on a negative value: a user
// function's error.
type failNegative struct {
	ctx topology.ProcessorContext[string, int64]
}

func (p *failNegative) Init(ctx topology.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	return nil
}
func (p *failNegative) Close() error { return nil }
func (p *failNegative) Process(r topology.Record[string, int64]) error {
	if r.Value < 0 {
		return fmt.Errorf("negative quantity %d", r.Value)
	}
	return p.ctx.Forward(r)
}

// mirrorThenFail writes every record to mirror, then runs it through
// failNegative to out: a failing record has already produced its mirror
// output when it fails.
func mirrorThenFail(t *testing.T, in, mirror, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	s := b.Stream(in, serde.String(), serde.Int64())
	s.To(mirror)
	s.Process(func() topology.Processor[string, int64, string, int64] { return &failNegative{} }, topology.Named("fail-negative")).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func keysOf(recs []*kgo.Record) string {
	var ks []string
	for _, r := range recs {
		ks = append(ks, string(r.Key))
	}
	return strings.Join(ks, ",")
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// produceWithPoison writes k0..k5 to partition 0 of in, k3 negative.
func produceWithPoison(t *testing.T, in string) {
	t.Helper()
	var recs []*kgo.Record
	for i := range 6 {
		v := int64(i)
		if i == 3 {
			v = -3
		}
		recs = append(recs, int64Record(in, 0, "k"+strconv.Itoa(i), &v))
	}
	kafkatest.Produce(t, recs...)
}

func TestProcessingErrorContinueSkipsTheWholeRecord(t *testing.T) {
	t.Parallel()
	in, mirror, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	topo := mirrorThenFail(t, in, mirror, out)
	produceWithPoison(t, in)
	app, stop := runApp(t, topo, processor.WithProcessingErrorHandler(processor.ContinueOnError), processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	// The failing record's mirror output was produced before it failed,
	// in the same transaction: it must not commit.
	if got := keysOf(kafkatest.ConsumeExactly(t, mirror, 5, kafkatest.Timeout, 2*time.Second)); got != "k0,k1,k2,k4,k5" {
		t.Fatalf("mirror outputs %s, want every record but the failed k3", got)
	}
	if got := keysOf(kafkatest.ConsumeExactly(t, out, 5, kafkatest.Timeout, time.Second)); got != "k0,k1,k2,k4,k5" {
		t.Fatalf("outputs %s, want every record but the failed k3", got)
	}
	m := scrape(t, "http://"+app.HTTPAddr())
	if m["tidemark_processing_errors_total"] != 1 {
		t.Fatalf("tidemark_processing_errors_total = %v, want 1", m["tidemark_processing_errors_total"])
	}
}

func TestProcessingErrorDeadLetterWritesTheInputWithItsOrigin(t *testing.T) {
	t.Parallel()
	in, mirror, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	topo := mirrorThenFail(t, in, mirror, out)
	produceWithPoison(t, in)
	app, stop := runApp(t, topo, processor.WithDeadLetterTopic(dlq),
		processor.WithProcessingErrorHandler(processor.DeadLetterOnError), processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	if got := keysOf(kafkatest.ConsumeExactly(t, mirror, 5, kafkatest.Timeout, 2*time.Second)); got != "k0,k1,k2,k4,k5" {
		t.Fatalf("mirror outputs %s, want every record but the failed k3", got)
	}
	dl := kafkatest.ConsumeExactly(t, dlq, 1, kafkatest.Timeout, time.Second)[0]
	if string(dl.Key) != "k3" || header(dl, "tidemark.error.kind") != "processing" ||
		!strings.Contains(header(dl, "tidemark.error"), "negative quantity -3") ||
		header(dl, "tidemark.source.topic") != in || header(dl, "tidemark.source.offset") != "3" {
		t.Fatalf("dead-letter record %q headers %v: want k3 with kind, error and origin", dl.Key, dl.Headers)
	}
	if got := header(dl, "tidemark.operator"); got != "fail-negative" {
		t.Fatalf("tidemark.operator = %q, want the failing operator fail-negative", got)
	}
	m := scrape(t, "http://"+app.HTTPAddr())
	if m["tidemark_dead_lettered_total"] != 1 || m["tidemark_processing_errors_total"] != 1 {
		t.Fatalf("dead_lettered %v, processing_errors %v; want 1 and 1", m["tidemark_dead_lettered_total"], m["tidemark_processing_errors_total"])
	}
}

// incompressible is n bytes of hex that compression cannot shrink below
// half: the producer compresses batches, and a repeated byte would fit.
func incompressible(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bigOnNine maps value 9 to a value larger than the output topic takes.
func bigOnNine(t *testing.T, in, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).
		MapValues(func(_ string, v int64) string {
			if v == 9 {
				return incompressible(4000)
			}
			return strconv.FormatInt(v, 10)
		}).WithSerdes(serde.String(), serde.String()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestRejectedOutputIsDeadLetteredAfterRetries(t *testing.T) {
	t.Parallel()
	in, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	topo := bigOnNine(t, in, out)
	var recs []*kgo.Record
	for i, v := range []int64{1, 2, 9, 3} {
		recs = append(recs, int64Record(in, 0, "k"+strconv.Itoa(i), &v))
	}
	kafkatest.Produce(t, recs...)
	app, stop := runApp(t, topo, processor.WithDeadLetterTopic(dlq),
		processor.WithProductionErrorHandler(processor.DeadLetterOnError), processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	if got := keysOf(kafkatest.ConsumeExactly(t, out, 3, kafkatest.Timeout, 2*time.Second)); got != "k0,k1,k3" {
		t.Fatalf("outputs %s, want every record but k2, whose output the topic rejects", got)
	}
	dl := kafkatest.ConsumeExactly(t, dlq, 1, kafkatest.Timeout, time.Second)[0]
	if string(dl.Key) != "k2" || header(dl, "tidemark.error.kind") != "production" ||
		!strings.Contains(header(dl, "tidemark.error"), "MESSAGE_TOO_LARGE") {
		t.Fatalf("dead-letter record %q headers %v: want k2, kind production, MESSAGE_TOO_LARGE", dl.Key, dl.Headers)
	}
	m := scrape(t, "http://"+app.HTTPAddr())
	if m["tidemark_production_errors_total"] != 1 || m["tidemark_dead_lettered_total"] != 1 {
		t.Fatalf("production_errors %v, dead_lettered %v; want 1 and 1", m["tidemark_production_errors_total"], m["tidemark_dead_lettered_total"])
	}
}

// A record the dead-letter topic rejects has nowhere to go: the app must
// stop with an error naming it, not retry forever while lag grows.
func TestDeadLetterTopicThatRejectsTheRecordFailsRun(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	dlq := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("huge"), Value: []byte(incompressible(8000))})
	_, done := startApp(t, topo, processor.WithDeadLetterTopic(dlq))
	err = runError(t, done, time.Minute)
	if !strings.Contains(err.Error(), "dead-letter topic") || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("Run: %.300v; want it to say the dead-letter topic rejects the record", err)
	}
	requireNoOpenTransaction(t, dlq)
}

// Two apps in one process are independent: one failing on a bad record
// does not stop the other.
func TestOneAppsBadRecordDoesNotStopAnother(t *testing.T) {
	t.Parallel()
	inA, outA := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	inB, outB := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	failing := mirrorThenFail(t, inA, kafkatest.NewTopic(t, 1, nil), outA)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(inB, serde.String(), serde.Int64()).To(outB)
	healthy, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, doneA := startApp(t, failing)
	_, doneB := startApp(t, healthy)
	produceWithPoison(t, inA)
	if err := runError(t, doneA, time.Minute); !strings.Contains(err.Error(), "negative quantity") {
		t.Fatalf("failing app: %v", err)
	}
	kafkatest.Produce(t, int64Record(inB, 0, "after", ptr(1)))
	kafkatest.ConsumeExactly(t, outB, 1, kafkatest.Timeout, time.Second)
	select {
	case err := <-doneB:
		t.Fatalf("the healthy app stopped: %v", errors.Join(err, errors.New("(nil means it returned)")))
	default:
	}
}

// A state value too large for its changelog has no input record to blame
// or skip: after the retries the app must stop with an error naming the
// changelog, not abort and redo the same transaction forever.
func TestRejectedChangelogRecordFailsRun(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.String()).GroupByKey().Reduce(func(agg, v string) string { return agg + v })
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Each value fits; their concatenation is larger than any batch.
	var recs []*kgo.Record
	for range 4 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte(incompressible(300_000))})
	}
	kafkatest.Produce(t, recs...)
	_, done := startApp(t, topo)
	err = runError(t, done, 15*time.Second)
	if !strings.Contains(err.Error(), "changelog") || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("Run: %.300v; want it to say the changelog record is too large", err)
	}
}

// With ProductionRetries 1 a rejected output still reaches the handler:
// the batch that carried it is redone output by output first.
func TestRejectedOutputWithOneRetryReachesTheHandler(t *testing.T) {
	t.Parallel()
	in, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	var recs []*kgo.Record
	for i, v := range []int64{1, 9, 2} {
		recs = append(recs, int64Record(in, 0, "k"+strconv.Itoa(i), &v))
	}
	kafkatest.Produce(t, recs...)
	_, stop := runApp(t, bigOnNine(t, in, out), processor.WithDeadLetterTopic(dlq),
		processor.WithProductionErrorHandler(processor.DeadLetterOnError),
		func(c *processor.Config) { c.ProductionRetries = 1 })
	defer stop()
	if got := keysOf(kafkatest.ConsumeExactly(t, out, 2, kafkatest.Timeout, time.Second)); got != "k0,k2" {
		t.Fatalf("outputs %s, want k0 and k2", got)
	}
	if dl := kafkatest.ConsumeExactly(t, dlq, 1, kafkatest.Timeout, time.Second)[0]; string(dl.Key) != "k1" {
		t.Fatalf("dead letter %q, want k1", dl.Key)
	}
}

// A dead-letter topic deleted while the app runs cannot take the record:
// the app must stop saying so, not abort and redo the transaction forever
// while the partition stalls.
func TestDeletedDeadLetterTopicFailsRun(t *testing.T) {
	t.Parallel()
	in, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), quantity).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, int64Record(in, 0, "a", ptr(1)))
	_, done := startApp(t, topo, processor.WithDeadLetterTopic(dlq))
	kafkatest.ConsumeExactly(t, out, 1, 20*time.Second, 0)
	if _, err := kafkatest.Admin(t).DeleteTopics(context.Background(), dlq); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, int64Record(in, 0, "b", nil), int64Record(in, 0, "c", ptr(3)))
	err = runError(t, done, 20*time.Second)
	if !errors.Is(err, processor.ErrMissingTopic) || !strings.Contains(err.Error(), dlq) {
		t.Fatalf("Run: %.300v; want ErrMissingTopic naming %s", err, dlq)
	}
}

// Outputs that each fit the topic's max.message.bytes must not be batched
// past it: the broker would reject the batch, and every transaction would
// be aborted and redone output by output.
func TestBatchesRespectTheOutputTopicsMaxMessageBytes(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "8192"})
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.String()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: []byte(incompressible(200))})
	}
	kafkatest.Produce(t, recs...)
	app, stop := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	kafkatest.ConsumeExactly(t, out, len(recs), kafkatest.Timeout, time.Second)
	if m := scrape(t, "http://"+app.HTTPAddr()); m["tidemark_aborts_total"] != 0 {
		t.Fatalf("tidemark_aborts_total = %v, want 0: batches were rejected", m["tidemark_aborts_total"])
	}
}

// A decision taken for a bad record whose partition then moves to another
// instance, before a commit moved past it, is forgotten: this instance
// will not read the record again, and over a long run such decisions
// would pile up with every rebalance.
func TestPoisonDecisionsOfAMovedPartitionAreForgotten(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), serde.Int64()).
		Process(func() topology.Processor[string, int64, string, int64] { return &failNegative{} }, topology.Named("fail-negative")).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range int32(2) {
		recs = append(recs, int64Record(in, p, fmt.Sprintf("k%d-bad", p), ptr(-1)), int64Record(in, p, fmt.Sprintf("k%d-good", p), ptr(1)))
	}
	kafkatest.Produce(t, recs...)
	// a decides on both bad records in its first transaction, which never
	// commits by itself; the second decision waits for b to take one of
	// a's two partitions.
	var second atomic.Int32
	var other atomic.Pointer[processor.App]
	hold := func(ectx processor.ErrorContext, _ error) processor.ErrorAction {
		if second.Add(1) == 2 {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if o := other.Load(); o != nil && o.Ready() {
					break
				}
			}
		}
		return processor.Continue
	}
	a, stopA := runApp(t, topo, fixedCommits(time.Minute), processor.WithInstanceID("a"),
		processor.WithProcessingErrorHandler(hold))
	defer stopA()
	deadline := time.Now().Add(kafkatest.Timeout)
	for second.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("a did not reach both bad records")
		}
		time.Sleep(20 * time.Millisecond)
	}
	bApp, stopB := runApp(t, topo, processor.WithInstanceID("b"), processor.WithProcessingErrorHandler(processor.ContinueOnError))
	defer stopB()
	other.Store(bApp)
	// a commits nothing for a minute: what is visible is b's, from the
	// partition that moved.
	got := kafkatest.ConsumeExactly(t, out, 1, kafkatest.Timeout, time.Second)
	var moved int
	if _, err := fmt.Sscanf(string(got[0].Key), "k%d-good", &moved); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%s/%d@", in, moved)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		stale := false
		for _, k := range processor.PoisonKeys(a) {
			stale = stale || strings.HasPrefix(k, prefix)
		}
		if !stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a still holds decisions %v for partition %d, which moved to b", processor.PoisonKeys(a), moved)
		}
	}
}
