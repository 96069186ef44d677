// Package kafkatest gives tests a real Apache Kafka broker and the small
// helpers every integration test needs: a unique topic, a client, produce,
// and consume-until with read_committed isolation.
//
// Brokers(t) finds a broker in this order:
//  1. TIDEMARK_KAFKA_BROKERS (comma-separated seed brokers), if set;
//  2. the broker `make kafka-up` started (recorded in .kafka/bootstrap);
//  3. where a Docker engine answers, the apache/kafka container
//     ContainerName, started through the docker command by the first test
//     binary that needs it and shared by all (it keeps running);
//  4. otherwise the test fails when TIDEMARK_REQUIRE_KAFKA=1 (as `make test`
//     sets) and is skipped with the command that starts a broker.
//
// Tests that hurt a broker (kill it, restart it, pause it) take their own
// with PrivateBroker(t) instead: a fresh broker in t.TempDir() with its own
// ports, which keeps its address across restarts and stops at cleanup.
package kafkatest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

const startHint = "start one with `make kafka-up` (needs Java 17+ and Maven), " +
	"or point TIDEMARK_KAFKA_BROKERS at an existing broker"

var (
	resolveOnce sync.Once
	resolved    []string
	resolveErr  error
	source      string
)

// Brokers returns the seed brokers of a reachable real Kafka broker.
func Brokers(t testing.TB) []string {
	t.Helper()
	resolveOnce.Do(func() { resolved, source, resolveErr = resolve() })
	if resolveErr == nil {
		return resolved
	}
	msg := fmt.Sprintf("no Kafka broker for this integration test: %v; %s", resolveErr, startHint)
	if os.Getenv("TIDEMARK_REQUIRE_KAFKA") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}

// Source says where Brokers found the broker ("env", "kafka-up",
// "docker"), for test logs.
func Source() string { return source }

func resolve() ([]string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if env := os.Getenv("TIDEMARK_KAFKA_BROKERS"); env != "" {
		seeds := strings.Split(env, ",")
		if err := testbroker.Ping(ctx, seeds[0]); err != nil {
			return nil, "", fmt.Errorf("TIDEMARK_KAFKA_BROKERS=%s does not answer: %w", env, err)
		}
		return seeds, "env", nil
	}
	var cfg testbroker.Config
	if err := cfg.EnsureDefaults(); err == nil {
		if r, err := cfg.Status(ctx); err == nil {
			return []string{r.Bootstrap}, "kafka-up", nil
		}
	}
	seeds, err := startContainer()
	if err != nil {
		return nil, "", err
	}
	return seeds, "docker", nil
}
