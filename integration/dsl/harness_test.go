// Package dsl_test runs DSL operators on the real broker across a restart
// and checks their outputs against independent reference models. The
// operators' own semantics are tested in the test driver
// (processor/tidemarktest); these tests prove that the service's state
// (changelogs, internal topics, restore) keeps those semantics when the
// process stops and a new one takes over.
package dsl_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// seeded returns a random source whose seed is logged, so a failure
// replays with TIDEMARK_SEED=<seed>.
func seeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TIDEMARK_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: TIDEMARK_SEED=%d go test -run '^%s$' ./integration/dsl)", seed, seed, t.Name())
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// startApp runs topo on the test broker with its state in dir until the
// returned stop is called (also at cleanup). Two apps built with the same
// application id and run one after the other are one service restarted:
// with the same dir the new one resumes from local state, with a fresh dir
// it restores every store from its changelog.
func startApp(t *testing.T, topo *topology.Topology, dir string, opts ...processor.Option) (stop func()) {
	t.Helper()
	_, stop = runApp(t, topo, dir, opts...)
	return stop
}

// runApp is startApp for a test that also queries the running app's
// stores: it returns the App with its stop (also called at cleanup).
func runApp(t *testing.T, topo *topology.Topology, dir string, opts ...processor.Option) (app *processor.App, stop func()) {
	t.Helper()
	app, err := processor.NewApp(topo, append([]processor.Option{
		processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("app did not stop within 60s")
		}
	}
	t.Cleanup(stop)
	return app, stop
}

// record is one input record: a nil value is a tombstone.
type record struct {
	key, value string
	tombstone  bool
	ts         int64 // event time, ms
}

// produce writes recs to topic (partitions partitions) in order, each to
// the partition the service's default partitioner picks for its key, so
// that inputs are co-partitioned with repartition topics and tables.
func produce(t *testing.T, topic string, partitions int32, recs ...record) {
	t.Helper()
	out := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: []byte(r.key), Timestamp: time.UnixMilli(r.ts),
			Partition: processor.DefaultPartition([]byte(r.key), partitions)}
		if !r.tombstone {
			kr.Value = []byte(r.value)
		}
		out = append(out, kr)
	}
	kafkatest.Produce(t, out...)
}

// latest folds an output topic read in order into its final table: the
// last value of each key; a tombstone removes the key.
func latest(recs []*kgo.Record) map[string]string {
	m := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(m, string(r.Key))
			continue
		}
		m[string(r.Key)] = string(r.Value)
	}
	return m
}

// readUntil reads topic (read_committed, from the start) until done holds
// for everything read, failing the test after timeout.
func readUntil(t *testing.T, topic string, timeout time.Duration, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	return kafkatest.ConsumeUntil(t, topic, timeout, done)
}
