package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
)

// inventoryEvents draws the first n inventory events of the generator
// with seed 3, on the default inventory topic.
func inventoryEvents(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	g, err := gen.New(gen.Config{Seed: 3, Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for len(recs) < n {
		r, err := g.NextRecord()
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic == gen.DefaultTopics.Inventory {
			recs = append(recs, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		}
	}
	return recs
}

// produceOnceCreated produces recs, again until the service has created
// their topic or deadline passes.
func produceOnceCreated(ctx context.Context, t *testing.T, cl *kgo.Client, recs []*kgo.Record, deadline time.Time, logs *bytes.Buffer) {
	t.Helper()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(pctx, recs...).FirstErr()
		pcancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce to %s: %v\nlogs:\n%s", recs[0].Topic, err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pollUntilAny polls cl until it has read at least one record or deadline
// passes, and returns how many it read.
func pollUntilAny(ctx context.Context, cl *kgo.Client, deadline time.Time) int {
	got := 0
	for got == 0 && time.Now().Before(deadline) {
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		got += cl.PollFetches(fctx).NumRecords()
		fcancel()
	}
	return got
}

// stopService cancels the service's context and checks that it returns
// cleanly within 30 s.
func stopService(t *testing.T, cancel context.CancelFunc, done <-chan error, logs *bytes.Buffer) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v\nlogs:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("service did not stop within 30s of cancel")
	}
}
