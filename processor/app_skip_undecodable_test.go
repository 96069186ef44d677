package processor_test

import (
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// A SkipUndecodable source's dropped record is replayed when its
// transaction is redone (here: a later record's processing error, skipped
// with ContinueOnError): tidemark_deserialization_errors_total counts the
// bad record once, not once per attempt, as it does a dead-lettered one.
// (tidemark_dropped_records_total observes processing and counts each
// attempt, as documented.) The long commit interval keeps the dropped
// record's batch and the failing record's batch in one transaction.
func TestRedoneTransactionCountsItsSkippedUndecodableRecordOnce(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), quantity, topology.SkipUndecodable()).
		Process(func() topology.Processor[string, int64, string, int64] { return &failNegative{} }, topology.Named("fail-negative")).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, int64Record(in, 0, "k0", ptr(0)), int64Record(in, 0, "k1", nil))
	app, stop := runApp(t, topo, processor.WithProcessingErrorHandler(processor.ContinueOnError), processor.WithHTTP("127.0.0.1:0"),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 5 * time.Second}))
	defer stop()
	deadline := time.Now().Add(kafkatest.Timeout)
	for app.HTTPAddr() == "" || scrape(t, "http://"+app.HTTPAddr())["tidemark_records_in_total"] < 2 {
		if time.Now().After(deadline) {
			t.Fatal("k0 and k1 not processed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the loop's export after the batch
	// k2's processing error redoes the open transaction without it: k0
	// and k1 are processed again.
	kafkatest.Produce(t, int64Record(in, 0, "k2", ptr(-2)), int64Record(in, 0, "k3", ptr(3)))
	if got := keysOf(kafkatest.ConsumeExactly(t, out, 2, kafkatest.Timeout, time.Second)); got != "k0,k3" {
		t.Fatalf("outputs %s, want k0,k3", got)
	}
	m := scrape(t, "http://"+app.HTTPAddr())
	if got := m["tidemark_processing_errors_total"]; got != 1 {
		t.Fatalf("tidemark_processing_errors_total = %v, want 1 (the test needs k2's redo)", got)
	}
	if got := m["tidemark_deserialization_errors_total"]; got != 1 {
		t.Errorf("tidemark_deserialization_errors_total = %v, want 1", got)
	}
}
