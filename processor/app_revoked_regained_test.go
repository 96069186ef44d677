package processor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestPartitionRegainedBeforeTheLoopClosedItsTaskIsRestored: instance "a"
// owns both partitions and its record loop is stuck in a slow user
// function while "b" joins, takes a partition, counts more records of it
// and leaves again, so the group gives the partition back to a before a's
// loop came round to close the task. a must not go on counting from the
// state it had before b's commits (its own Badger state): every key's
// counts must go 1, 2, 3, … across both owners, as exactly-once promises.
func TestPartitionRegainedBeforeTheLoopClosedItsTaskIsRestored(t *testing.T) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "regain")
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
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

	// a's loop blocks on a record of partition 0.
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("blocker"), Value: []byte("block"), Partition: 0})
	want["blocker"] = 1
	time.Sleep(time.Second)

	b, stopB := runApp(t, topoB, processor.WithInstanceID("b"))
	get := func(app *processor.App, key string) (processor.QueryResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return app.Get(ctx, "counts", []byte(key))
	}
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
	produceN := func(n int, what string) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(moved), Value: []byte(fmt.Sprint(what, i)), Partition: p})
		}
		kafkatest.Produce(t, recs...)
		want[moved] += n
	}
	produceN(5, "on-b-")
	deadline = time.Now().Add(30 * time.Second)
	for {
		res, err := get(b, moved)
		if err == nil && res.Found && countOf(t, res.Entries[0].Value) == int64(want[moved]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b: Get %s = %v, %v after 30s; want count %d", moved, res, err, want[moved])
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("b counted %s (partition %d) to %d; b leaves", moved, p, want[moved])
	stopB()

	// The group gives partition p back to a, whose loop is still blocked.
	adm := kafkatest.Admin(t)
	deadline = time.Now().Add(45 * time.Second)
	for back := false; !back; {
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not assigned back to a after 45s", p)
		}
		time.Sleep(200 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		groups, err := adm.DescribeGroups(ctx, appID)
		cancel()
		if err != nil {
			continue
		}
		for _, m := range groups[appID].Members {
			asg, ok := m.Assigned.AsConsumer()
			if !ok || m.InstanceID == nil || *m.InstanceID != "a" {
				continue
			}
			for _, tp := range asg.Topics {
				if tp.Topic == in && slices.Contains(tp.Partitions, p) {
					back = true
				}
			}
		}
	}
	unblock()
	produceN(3, "on-a-")
	checkCounts(t, out, want)
}
