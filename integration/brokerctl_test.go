package integration_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/integration/broker"
	"github.com/tidemark-streams/tidemark/integration/kafkatest"
)

// TestBrokerLifecycle starts a second, private broker the way `make kafka-up`
// does, and checks what the Makefile relies on: a second Up reuses it, Down
// stops it, and Status then says it is gone.
func TestBrokerLifecycle(t *testing.T) {
	kafkatest.Brokers(t) // same prerequisites (Java, jars) as the shared broker
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java not on PATH: the test broker needs Java 17+")
	}
	cfg := broker.Config{StateDir: t.TempDir(), HeapMB: 256}
	if err := cfg.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = cfg.Down(context.Background()) })
	first, err := cfg.Up(ctx, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if first.Reused {
		t.Fatalf("first Up in a fresh state dir reported reuse")
	}
	t.Logf("private broker at %s started in %s", first.Bootstrap, first.Started)
	second, err := cfg.Up(ctx, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if !second.Reused || second.Bootstrap != first.Bootstrap {
		t.Fatalf("second Up = %+v, want reuse of %s", second, first.Bootstrap)
	}
	if err := cfg.Down(ctx); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := cfg.Status(ctx); !errors.Is(err, broker.ErrNotRunning) {
		t.Fatalf("status after down = %v, want ErrNotRunning", err)
	}
	if err := broker.Ping(ctx, first.Bootstrap); err == nil {
		t.Fatalf("broker at %s still answers after Down", first.Bootstrap)
	}
}
