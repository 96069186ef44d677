package txn_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/txn"
)

// TestFenceDepartedEndsAHangingTransaction leaves a transaction open the way
// a SIGKILLed member does (records produced, never ended, long timeout),
// then checks that it pins the last stable offset, and that the fencer
// aborts it at once so a record committed after it becomes readable.
func TestFenceDepartedEndsAHangingTransaction(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	app := kafkatest.UniqueName(t, "fence")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dead := kafkatest.Client(t, kgo.TransactionalID(txn.TransactionalID(app, "dead")),
		kgo.TransactionTimeout(5*time.Minute), kgo.DefaultProduceTopic(topic))
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := dead.ProduceSync(ctx, kgo.StringRecord("hanging")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A live member's open transaction must survive the fencer.
	live := kafkatest.Client(t, kgo.TransactionalID(txn.TransactionalID(app, "live")),
		kgo.TransactionTimeout(5*time.Minute), kgo.DefaultProduceTopic(topic))
	if err := live.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := live.ProduceSync(ctx, kgo.StringRecord("live")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := live.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := live.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := live.ProduceSync(ctx, kgo.StringRecord("live-open")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	adm := kafkatest.Admin(t)
	lso := func() int64 {
		o, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := o.Lookup(topic, 0)
		return l.Offset
	}
	if got := lso(); got != 0 {
		t.Fatalf("last stable offset %d before fencing, want 0 (pinned by the hanging transaction)", got)
	}
	f := &txn.Fencer{App: app, Self: "me", ClientOpts: []kgo.Opt{kgo.SeedBrokers(kafkatest.Brokers(t)...)}, Adm: adm}
	fenced, err := f.FenceDeparted(ctx, map[string]bool{"live": true})
	if err != nil {
		t.Fatalf("fence: %v", err)
	}
	if len(fenced) != 1 || fenced[0] != txn.TransactionalID(app, "dead") {
		t.Fatalf("fenced %v, want only the dead instance's id", fenced)
	}
	// The dead transaction is aborted: the stable offset moves up to the
	// live member's open transaction, past the committed "live" record.
	deadline := time.Now().Add(10 * time.Second)
	for lso() < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := lso(); got < 2 {
		t.Fatalf("last stable offset %d after fencing, want ≥ 2", got)
	}
	if err := live.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the live member's transaction was disturbed: %v", err)
	}
	got := kafkatest.ConsumeExactly(t, topic, 2, kafkatest.Timeout, time.Second)
	if string(got[0].Value) != "live" || string(got[1].Value) != "live-open" {
		t.Fatalf("read_committed saw %s, want live, live-open", kafkatest.Summary(got, 5))
	}
}
