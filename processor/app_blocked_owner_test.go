package processor_test

import (
	"context"
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

// blockedOwner is the scenario of a partition that moves while its owner's
// record loop is stuck in a slow user function: instance "a" counts the
// keys of both partitions of in, then blocks on a record of partition 0
// until unblock; the caller starts "b" with topoB.
type blockedOwner struct {
	appID, in, out string
	a              *processor.App
	topoB          *topology.Topology
	want           map[string]int // every key's count so far
	unblock        func()
}

func startBlockedOwner(t *testing.T, prefix string) *blockedOwner {
	t.Helper()
	s := &blockedOwner{in: kafkatest.NewTopic(t, 2, nil), out: kafkatest.NewTopic(t, 2, nil), appID: kafkatest.UniqueName(t, prefix)}
	release := make(chan struct{})
	var once sync.Once
	s.unblock = func() { once.Do(func() { close(release) }) }
	t.Cleanup(s.unblock) // before the apps' stops, which run first (LIFO) otherwise
	topoA := buildBlockingCount(t, s.appID, s.in, s.out, func(v string) {
		if v == "block" {
			<-release
		}
	})
	s.topoB = buildBlockingCount(t, s.appID, s.in, s.out, func(string) {})
	s.want = produceKeysN(t, s.in, 0, 40, 8, 2)
	s.a, _ = runApp(t, topoA, processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"))
	t.Cleanup(s.unblock)
	checkCounts(t, s.out, s.want)
	waitReady(t, s.a)
	return s
}

// block makes a's loop block on a record of partition 0.
func (s *blockedOwner) block(t *testing.T) {
	kafkatest.Produce(t, &kgo.Record{Topic: s.in, Key: []byte("blocker"), Value: []byte("block"), Partition: 0})
	s.want["blocker"] = 1
	time.Sleep(time.Second)
}

func (s *blockedOwner) get(app *processor.App, key string) (processor.QueryResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return app.Get(ctx, "counts", []byte(key))
}

// movedTo waits until b answers one of the keys and returns it and its
// partition.
func (s *blockedOwner) movedTo(t *testing.T, b *processor.App) (string, int32) {
	t.Helper()
	for deadline := time.Now().Add(45 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("b answers none of the keys after 45s")
		}
		time.Sleep(100 * time.Millisecond)
		for k := range s.want {
			if k == "blocker" {
				continue // written to partition 0 whatever its hash
			}
			if res, err := s.get(b, k); err == nil && res.Found {
				return k, processor.DefaultPartition([]byte(k), 2)
			}
		}
	}
}

// produce writes n more records of key to partition p and counts them.
func (s *blockedOwner) produce(t *testing.T, key string, p int32, n int, what string) {
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: s.in, Key: []byte(key), Value: []byte(fmt.Sprint(what, i)), Partition: p})
	}
	kafkatest.Produce(t, recs...)
	s.want[key] += n
}

// waitCount waits until app answers key with its count in want.
func (s *blockedOwner) waitCount(t *testing.T, app *processor.App, key string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := s.get(app, key)
		if err == nil && res.Found && countOf(t, res.Entries[0].Value) == int64(s.want[key]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get %s = %v, %v after 30s; want count %d", key, res, err, s.want[key])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
