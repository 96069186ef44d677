package processor_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// produceOneBig writes k0..k3 with values 1, 2, 9, 3 to partition 0 of
// in: bigOnNine makes k2's output larger than its topic takes.
func produceOneBig(t *testing.T, in string) {
	t.Helper()
	var recs []*kgo.Record
	for i, v := range []int64{1, 2, 9, 3} {
		recs = append(recs, int64Record(in, 0, "k"+strconv.Itoa(i), &v))
	}
	kafkatest.Produce(t, recs...)
}

// Under at-least-once an output the broker rejects for good takes the
// exactly-once path: redone in isolation, then the handler dead-letters
// its input record, and the outputs of the others are written (at least
// once: the redos may repeat them).
func TestAtLeastOnceRejectedOutputIsDeadLetteredAfterRetries(t *testing.T) {
	t.Parallel()
	in, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	topo := bigOnNine(t, in, out)
	produceOneBig(t, in)
	_, stop := runApp(t, topo, processor.WithGuarantee(processor.AtLeastOnce), processor.WithDeadLetterTopic(dlq),
		processor.WithProductionErrorHandler(processor.DeadLetterOnError))
	defer stop()
	kafkatest.ConsumeUntil(t, dlq, time.Minute, func(rs []*kgo.Record) bool { return len(rs) > 0 })
	for deadline := time.Now().Add(time.Minute); committedOffsets(t, topo.Application(), in)[0] < 4; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("committed offset %d after a minute, want 4: the inputs behind the rejected output stall",
				committedOffsets(t, topo.Application(), in)[0])
		}
	}
	seen := map[string]bool{}
	for _, r := range kafkatest.ConsumeUntil(t, out, 20*time.Second, func(rs []*kgo.Record) bool {
		keys := map[string]bool{}
		for _, r := range rs {
			keys[string(r.Key)] = true
		}
		return keys["k0"] && keys["k1"] && keys["k3"]
	}) {
		seen[string(r.Key)] = true
	}
	if seen["k2"] {
		t.Fatal("k2's output was written although the topic rejects it")
	}
	for _, dl := range kafkatest.ConsumeUntil(t, dlq, 10*time.Second, func(rs []*kgo.Record) bool { return len(rs) > 0 }) {
		if string(dl.Key) != "k2" || header(dl, "tidemark.error.kind") != "production" ||
			!strings.Contains(header(dl, "tidemark.error"), "MESSAGE_TOO_LARGE") {
			t.Fatalf("dead-letter record %q headers %v: want k2, kind production, MESSAGE_TOO_LARGE", dl.Key, dl.Headers)
		}
	}
}

// With the default handler (fail) Run returns an error naming the input
// record whose output is rejected, instead of restarting forever.
func TestAtLeastOnceRejectedOutputFailsRunNamingTheRecord(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	topo := bigOnNine(t, in, out)
	produceOneBig(t, in)
	_, done := startApp(t, topo, processor.WithGuarantee(processor.AtLeastOnce))
	err := runError(t, done, time.Minute)
	for _, want := range []string{in + "/0@2", out, "MESSAGE_TOO_LARGE"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run: %.400v; want it to name %s", err, want)
		}
	}
	if got := committedOffsets(t, topo.Application(), in)[0]; got > 2 {
		t.Fatalf("committed offset %d passes the input at 2 whose output was never written", got)
	}
}

// With a handler that skips, the record is skipped and the inputs behind
// it go on.
func TestAtLeastOnceRejectedOutputIsSkipped(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	topo := bigOnNine(t, in, out)
	produceOneBig(t, in)
	_, stop := runApp(t, topo, processor.WithGuarantee(processor.AtLeastOnce),
		processor.WithProductionErrorHandler(processor.ContinueOnError))
	defer stop()
	for deadline := time.Now().Add(time.Minute); committedOffsets(t, topo.Application(), in)[0] < 4; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("committed offset %d after a minute, want 4: the inputs behind the rejected output stall",
				committedOffsets(t, topo.Application(), in)[0])
		}
	}
	kafkatest.ConsumeUntil(t, out, 20*time.Second, func(rs []*kgo.Record) bool {
		keys := map[string]bool{}
		for _, r := range rs {
			keys[string(r.Key)] = true
		}
		return keys["k0"] && keys["k1"] && keys["k3"]
	})
}
