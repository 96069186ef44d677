package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

// runUntilStopped runs the service until it stops by itself (within 60 s)
// and returns its error.
func runUntilStopped(t *testing.T, cfg serviceConfig) (string, error) {
	t.Helper()
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs bytes.Buffer
	err = s.run(ctx, &logs)
	if ctx.Err() != nil {
		t.Fatalf("the service did not stop by itself within 60s (err %v)\nlogs:\n%s", err, logs.String())
	}
	return logs.String(), err
}

// A service started without --create-topics on a cluster that lacks the
// pipelines' topics stops naming them and the flag that creates them.
func TestRunMissingTopicsErrorNamesCreateTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = cluster.ListenAddrs(), t.TempDir(), ""
	cfg.Pipelines, cfg.LogLevel = []string{pipelines.Inventory}, "warn"
	logs, err := runUntilStopped(t, cfg)
	if err == nil || !strings.Contains(err.Error(), gen.DefaultTopics.Inventory) || !strings.Contains(err.Error(), "--create-topics") {
		t.Fatalf("run without the topics: %v; want an error naming %s and --create-topics\nlogs:\n%s", err, gen.DefaultTopics.Inventory, logs)
	}
}

// A service without a dead-letter topic stops at an undecodable input
// record, and its error says which settings go on past such records.
func TestRunUndecodableRecordErrorNamesTheSettings(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = brokers, t.TempDir(), ""
	cfg.Pipelines, cfg.CreateTopics, cfg.Partitions, cfg.LogLevel = []string{pipelines.Inventory}, true, 1, "warn"
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	// Create the topics first, then put a record no serde can read in
	// the inventory topic.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.createTopics(ctx, nil); err != nil {
		t.Fatal(err)
	}
	bad := &kgo.Record{Topic: gen.DefaultTopics.Inventory, Key: []byte("sku-1"), Value: []byte("not an inventory event")}
	if err := cl.ProduceSync(ctx, bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	logs, err := runUntilStopped(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "--dead-letter-topic") || !strings.Contains(err.Error(), "--skip-undecodable") {
		t.Fatalf("run over an undecodable record: %v; want it to name --dead-letter-topic and --skip-undecodable\nlogs:\n%s", err, logs)
	}
}
