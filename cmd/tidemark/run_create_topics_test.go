package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

// freePort returns a local TCP port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// 'tidemark run --create-topics' started before its broker accepts
// connections (a host booting, compose without a health check) failed at
// once with "connection refused", while the same run without
// --create-topics waits up to 60 s for the broker. It now waits too: the
// broker comes up 2 s later and the topics are created.
func TestRunCreateTopicsWaitsForABrokerThatIsStarting(t *testing.T) {
	port := freePort(t)
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = []string{fmt.Sprintf("127.0.0.1:%d", port)}, t.TempDir(), ""
	cfg.Pipelines, cfg.CreateTopics, cfg.Partitions, cfg.LogLevel = []string{pipelines.Inventory}, true, 1, "warn"
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.createTopics(ctx, s.logger(&logs)) }()

	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("createTopics returned %v before the broker started; want it to wait", err)
	default:
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	if err := <-done; err != nil {
		t.Fatalf("createTopics once the broker started: %v\nlogs:\n%s", err, logs.String())
	}
	topics := listTopics(ctx, t, cluster.ListenAddrs())
	for _, want := range []string{gen.DefaultTopics.Inventory, pipelines.DefaultOutputs.Availability} {
		if !topics.Has(want) {
			t.Errorf("topic %s was not created; have %v", want, topics.Names())
		}
	}
}

// A service stopped (SIGTERM) while --create-topics waits for its broker
// stops cleanly, at once.
func TestRunStoppedWhileWaitingForTheBrokerStopsCleanly(t *testing.T) {
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}, t.TempDir(), ""
	cfg.Pipelines, cfg.CreateTopics, cfg.LogLevel = []string{pipelines.Inventory}, true, "warn"
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, &logs) }()
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run stopped while waiting for the broker: %v, want a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop within 10s of its cancellation")
	}
}
