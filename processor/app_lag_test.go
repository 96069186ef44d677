package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestIdleAppOnTransactionalInputReportsNoLag: an input written by a
// transactional producer holds a commit marker after every transaction and
// the records of aborted ones, none of which a read_committed consumer is
// given. Once the App has processed every committed record and the input
// goes quiet, tidemark_consumer_lag_records is 0 (and stays so), as the
// TidemarkNoProgress alert (lag > 0, nothing processed) assumes. It used to
// stay at the markers and aborted records after the last fetched record,
// forever.
func TestIdleAppOnTransactionalInputReportsNoLag(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "lag"), in, out)

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(t)...), kgo.TransactionalID(kafkatest.UniqueName(t, "txn")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txn := func(commit kgo.TransactionEndTry, from int) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+20; i++ {
			k := fmt.Sprintf("sku-%02d", i%4)
			cl.Produce(ctx, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(fmt.Sprint(i)),
				Partition: processor.DefaultPartition([]byte(k), 2)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, 0)
	txn(kgo.TryCommit, 20)
	txn(kgo.TryAbort, 40) // 20 records no one is given
	txn(kgo.TryCommit, 60)

	app, _ := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	kafkatest.ConsumeExactly(t, out, 60, 30*time.Second, time.Second)
	base := "http://" + app.HTTPAddr()
	deadline := time.Now().Add(20 * time.Second)
	var lag float64
	for {
		m := scrape(t, base)
		if lag = m["tidemark_consumer_lag_records"]; lag == 0 && m["tidemark_records_in_total"] == 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tidemark_consumer_lag_records %v and %v records in, 20 s after the outputs; want 0 lag once the 60 committed inputs are processed",
				lag, m["tidemark_records_in_total"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	// And it stays 0 while nothing arrives.
	time.Sleep(3 * time.Second)
	if lag = scrape(t, base)["tidemark_consumer_lag_records"]; lag != 0 {
		t.Fatalf("idle: tidemark_consumer_lag_records %v, want 0", lag)
	}
}
