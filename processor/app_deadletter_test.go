package processor_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// quantity is a user serde that, like most outside the serde package, does
// not wrap serde.ErrDecode: the source's decode failure is what counts.
var quantity = serde.Func[int64]{
	EncodeFunc: func(dst []byte, v int64) ([]byte, error) { return binary.BigEndian.AppendUint64(dst, uint64(v)), nil },
	DecodeFunc: func(b []byte) (int64, error) {
		if len(b) != 8 {
			return 0, errors.New("quantity: not 8 bytes")
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	},
}

func TestDeadLetterTopicTakesUndecodableRecordsExactlyOnce(t *testing.T) {
	t.Parallel()
	in, out, dlq := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), quantity).MapValues(func(_ string, v int64) int64 { return v * 10 }).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Every fifth record of each partition is poison.
	var recs []*kgo.Record
	bad := map[string]bool{} // "partition@offset"
	for p := range int32(2) {
		for i := range 10 {
			key := fmt.Sprintf("k%d-%d", p, i)
			if i%5 == 2 {
				recs = append(recs, int64Record(in, p, key, nil))
				bad[fmt.Sprintf("%d@%d", p, i)] = true
				continue
			}
			recs = append(recs, int64Record(in, p, key, ptr(int64(i))))
		}
	}
	kafkatest.Produce(t, recs...)
	_, done := startApp(t, topo, processor.WithDeadLetterTopic(dlq))

	for _, r := range kafkatest.ConsumeExactly(t, out, 16, 20*time.Second, 2*time.Second) {
		var p, i int64
		if _, err := fmt.Sscanf(string(r.Key), "k%d-%d", &p, &i); err != nil {
			t.Fatal(err)
		}
		if got := int64(binary.BigEndian.Uint64(r.Value)); got != 10*i || bad[fmt.Sprintf("%d@%d", p, i)] {
			t.Fatalf("output %s = %d, want %d from a good record", r.Key, got, 10*i)
		}
	}
	dead := kafkatest.ConsumeExactly(t, dlq, len(bad), 10*time.Second, time.Second)
	for _, r := range dead {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		at := h["tidemark.source.partition"] + "@" + h["tidemark.source.offset"]
		if h["tidemark.source.topic"] != in || !bad[at] {
			t.Fatalf("dead letter %q from %s %s is not one of the poison records %v", r.Key, h["tidemark.source.topic"], at, bad)
		}
		delete(bad, at)
		if string(r.Value) != "bad" {
			t.Fatalf("dead letter value %q, want the raw bytes", r.Value)
		}
		if want := "quantity: not 8 bytes"; !strings.Contains(h["tidemark.error"], want) {
			t.Fatalf("tidemark.error %q does not carry the serde error %q", h["tidemark.error"], want)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Run stopped on a dead-lettered record: %v", err)
	default:
	}
	// The poison records' offsets are committed with the rest: nothing is
	// left to reprocess.
	deadline := time.Now().Add(10 * time.Second)
	for got := committedOffsets(t, topo.Application(), in); got[0] != 10 || got[1] != 10; got = committedOffsets(t, topo.Application(), in) {
		if time.Now().After(deadline) {
			t.Fatalf("committed input offsets %v, want 10 on both partitions", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SkipUndecodable on the source wins over the dead-letter topic: the
// topology asked to drop poison, so nothing reaches the topic.
func TestSkipUndecodableSourceDropsInsteadOfDeadLettering(t *testing.T) {
	t.Parallel()
	in, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), quantity, topology.SkipUndecodable()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, int64Record(in, 0, "a", ptr(1)), int64Record(in, 0, "b", nil), int64Record(in, 0, "c", ptr(3)))
	startApp(t, topo, processor.WithDeadLetterTopic(dlq))
	got := kafkatest.ConsumeExactly(t, out, 2, 20*time.Second, time.Second)
	if string(got[0].Key)+string(got[1].Key) != "ac" {
		t.Fatalf("outputs %s, want a and c", kafkatest.Summary(got, 5))
	}
	kafkatest.ConsumeExactly(t, dlq, 0, 5*time.Second, time.Second)
}

// globalJoin joins in (string keys, quantities) with the global table of
// topic g (store "rates") under the key "m"+key, emitting value×rate, or
// −1 for a key the table lacks.
func globalJoin(t *testing.T, in, g, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	rates := b.GlobalTable(g, serde.String(), quantity, topology.Named("rates"))
	b.Stream(in, serde.String(), quantity).
		LeftJoinGlobal(rates, func(k string, _ int64) string { return "m" + k },
			func(_ string, v, rate int64, found bool) int64 {
				if !found {
					return -1
				}
				return v * rate
			}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// An undecodable record of a global table's topic is the bad input, not
// the stream records that look its key up: the app fails naming it, before
// any stream record is blamed for it.
func TestUndecodableGlobalRecordFailsRunNamingIt(t *testing.T) {
	t.Parallel()
	in, g, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	kafkatest.Produce(t, int64Record(g, 0, "m1", ptr(2)), int64Record(g, 0, "m2", nil))
	kafkatest.Produce(t, int64Record(in, 0, "1", ptr(5)), int64Record(in, 0, "2", ptr(7)))
	_, done := startApp(t, globalJoin(t, in, g, out))
	err := runError(t, done, 30*time.Second)
	if !strings.Contains(err.Error(), g+"/0@1") || !strings.Contains(err.Error(), "quantity: not 8 bytes") {
		t.Fatalf("Run: %.400v; want it to name the global record %s/0@1 and its serde error", err, g)
	}
	if strings.Contains(err.Error(), in) {
		t.Fatalf("Run: %.400v; blames a stream record of %s for the global table's bad record", err, in)
	}
}

// With a dead-letter topic an undecodable global record is skipped and
// counted: the stream records looking its key up are not failed, skipped
// or dead-lettered for it.
func TestUndecodableGlobalRecordIsSkippedWithADeadLetterTopic(t *testing.T) {
	t.Parallel()
	in, g, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	kafkatest.Produce(t, int64Record(g, 0, "m1", ptr(2)), int64Record(g, 0, "m2", nil))
	kafkatest.Produce(t, int64Record(in, 0, "1", ptr(5)), int64Record(in, 0, "2", ptr(7)))
	app, done := startApp(t, globalJoin(t, in, g, out), processor.WithDeadLetterTopic(dlq),
		processor.WithProcessingErrorHandler(processor.DeadLetterOnError), processor.WithHTTP("127.0.0.1:0"))
	got := kafkatest.ConsumeExactly(t, out, 2, 20*time.Second, time.Second)
	if v1, v2 := int64(binary.BigEndian.Uint64(got[0].Value)), int64(binary.BigEndian.Uint64(got[1].Value)); v1 != 10 || v2 != -1 {
		t.Fatalf("outputs %d, %d; want 10 and -1 (m2's record skipped)", v1, v2)
	}
	select {
	case err := <-done:
		t.Fatalf("Run stopped: %v", err)
	default:
	}
	kafkatest.ConsumeExactly(t, dlq, 0, 3*time.Second, time.Second)
	if m := scrape(t, "http://"+app.HTTPAddr()); m["tidemark_deserialization_errors_total"] != 1 {
		t.Fatalf("tidemark_deserialization_errors_total = %v, want 1", m["tidemark_deserialization_errors_total"])
	}
}

// A transaction redone after an abort replays its undecodable records: the
// error counters must count each bad record once, not once per attempt.
func TestRedoneTransactionCountsItsUndecodableRecordOnce(t *testing.T) {
	t.Parallel()
	in, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), quantity).
		Process(func() topology.Processor[string, int64, string, int64] { return &failNegative{} }, topology.Named("fail-negative")).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// k1 does not decode; k2's processing error aborts the transaction,
	// which is redone without k2, replaying k1.
	kafkatest.Produce(t, int64Record(in, 0, "k0", ptr(0)), int64Record(in, 0, "k1", nil),
		int64Record(in, 0, "k2", ptr(-2)), int64Record(in, 0, "k3", ptr(3)))
	app, stop := runApp(t, topo, processor.WithDeadLetterTopic(dlq),
		processor.WithProcessingErrorHandler(processor.ContinueOnError), processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	if got := keysOf(kafkatest.ConsumeExactly(t, out, 2, kafkatest.Timeout, time.Second)); got != "k0,k3" {
		t.Fatalf("outputs %s, want k0,k3", got)
	}
	kafkatest.ConsumeExactly(t, dlq, 1, 10*time.Second, time.Second)
	m := scrape(t, "http://"+app.HTTPAddr())
	for name, want := range map[string]float64{"tidemark_deserialization_errors_total": 1,
		"tidemark_dead_lettered_total": 1, "tidemark_processing_errors_total": 1} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
}
