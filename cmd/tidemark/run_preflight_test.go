package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

// 'tidemark run --create-topics' with its http address taken created the
// pipelines' topics and only then failed on the port. The port is now
// checked first: the error names it and no topic exists.
func TestRunCreateTopicsHTTPAddrTakenCreatesNothing(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = cluster.ListenAddrs(), t.TempDir(), taken.Addr().String()
	cfg.Pipelines, cfg.CreateTopics, cfg.Partitions, cfg.LogLevel = []string{pipelines.Inventory}, true, 1, "warn"
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var logs bytes.Buffer
	err = s.run(ctx, &logs)
	t.Logf("run: %v", err)
	if err == nil {
		t.Fatal("run returned nil, want an error")
	}
	if !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "--http") {
		t.Errorf("run: %v, want an error naming %s and --http", err, taken.Addr())
	}
	if names := listTopics(ctx, t, cluster.ListenAddrs()).Names(); len(names) > 0 {
		t.Errorf("the failed start created topics %v", names)
	}
}

// listTopics lists the topics of the cluster at brokers.
func listTopics(ctx context.Context, t *testing.T, brokers []string) kadm.TopicDetails {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return topics
}
