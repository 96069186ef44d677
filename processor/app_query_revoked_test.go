package processor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// buildBlockingCount is buildCount with a step that calls hold for every
// value before counting it.
func buildBlockingCount(t *testing.T, app, in, out string, hold func(v string)) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).
		MapValues(func(_, v string) string { hold(v); return v }, topology.Named("hold")).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestQueriesStopAnsweringARevokedPartition: instance "a" owns both
// partitions and its record loop is stuck in a slow user function when
// "b" joins. The group moves a partition to b, which restores it, counts
// new records and commits, while a's loop has not yet come round to close
// the task. A key of the moved partition must not be answered by a from
// its state any more (421 to the owner, or 503 while it moves): a kept
// answering 200 with the count from before b's commits, silently.
func TestQueriesStopAnsweringARevokedPartition(t *testing.T) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "iqrevoke")
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the apps' stops, which run first (LIFO) otherwise
	topoA := buildBlockingCount(t, appID, in, out, func(v string) {
		if v == "block" {
			<-release
		}
	})
	topoB := buildBlockingCount(t, appID, in, out, func(string) {})

	want := produceKeysN(t, in, 0, 40, 8, 2)
	a, _ := runApp(t, topoA, processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"))
	t.Cleanup(unblock)
	checkCounts(t, out, want)
	waitReady(t, a)
	get := func(app *processor.App, key string) (processor.QueryResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return app.Get(ctx, "counts", []byte(key))
	}
	for k, n := range want {
		res, err := get(a, k)
		if err != nil || !res.Found || countOf(t, res.Entries[0].Value) != int64(n) {
			t.Fatalf("a alone: Get %s = %v, %v; want count %d", k, res, err, n)
		}
	}

	// a's loop blocks on a record of partition 0.
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("blocker"), Value: []byte("block"), Partition: 0})
	time.Sleep(time.Second)

	b, _ := runApp(t, topoB, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"))
	// b takes one of the partitions and counts new records of its keys.
	var moved string
	deadline := time.Now().Add(45 * time.Second)
	for moved == "" {
		if time.Now().After(deadline) {
			t.Fatal("b answers none of the keys after 45s")
		}
		time.Sleep(100 * time.Millisecond)
		for k := range want {
			if res, err := get(b, k); err == nil && res.Found {
				moved = k
				break
			}
		}
	}
	p := processor.DefaultPartition([]byte(moved), 2)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(moved), Value: []byte(fmt.Sprint("late-", i)), Partition: p})
	}
	kafkatest.Produce(t, recs...)
	now := int64(want[moved] + len(recs))
	deadline = time.Now().Add(30 * time.Second)
	for {
		res, err := get(b, moved)
		if err == nil && res.Found && countOf(t, res.Entries[0].Value) == now {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b: Get %s = %v, %v after 30s; want count %d", moved, res, err, now)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// a's loop is still blocked: it must not answer the moved key.
	res, err := get(a, moved)
	switch {
	case err == nil:
		t.Fatalf("a answers %s (partition %d, now b's, count %d there) with count %d from its state before the move",
			moved, p, now, countOf(t, res.Entries[0].Value))
	case errors.Is(err, processor.ErrNotLocal), errors.Is(err, processor.ErrRestoring), errors.Is(err, processor.ErrNoOwner):
		t.Logf("a: Get %s: %v", moved, err)
	default:
		t.Fatalf("a: Get %s: %v; want ErrNotLocal, ErrRestoring or ErrNoOwner", moved, err)
	}
	unblock()
}
