package integration_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// TestBrokerLifecycle starts a second, private broker the way `make kafka-up`
// does, and checks what the Makefile relies on: a second Up reuses it, Down
// stops it, and Status then says it is gone.
func TestBrokerLifecycle(t *testing.T) {
	kafkatest.NeedBrokerTools(t)
	cfg := testbroker.Config{StateDir: t.TempDir(), HeapMB: 256}
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
	if _, err := cfg.Status(ctx); !errors.Is(err, testbroker.ErrNotRunning) {
		t.Fatalf("status after down = %v, want ErrNotRunning", err)
	}
	if err := testbroker.Ping(ctx, first.Bootstrap); err == nil {
		t.Fatalf("broker at %s still answers after Down", first.Bootstrap)
	}
}

// TestBrokerctlRestartKeepsPortAndData drives the brokerctl binary the way
// `make kafka-restart` and a fault-injection script do: restart (graceful
// and --hard) brings the broker back at the same address with its topics;
// pause makes status fail until resume; after down, start refuses.
func TestBrokerctlRestartKeepsPortAndData(t *testing.T) {
	kafkatest.NeedBrokerTools(t)
	bin := filepath.Join(t.TempDir(), "brokerctl")
	if out, err := exec.Command("go", "build", "-o", bin, "../internal/testbroker/cmd/brokerctl").CombinedOutput(); err != nil {
		t.Fatalf("go build brokerctl: %v\n%s", err, out)
	}
	state := t.TempDir()
	ctl := func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "TIDEMARK_KAFKA_DIR="+state)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("brokerctl %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
		if err != nil {
			return stdout.String(), errors.New(stderr.String())
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := ctl(args...)
		if err != nil {
			t.Fatalf("brokerctl %s: %v; broker log:\n%s", strings.Join(args, " "), err, brokerctlLogTail(state))
		}
		return out
	}
	t.Cleanup(func() { _, _ = ctl("down") })

	addr := must("up")
	topic := kafkatest.UniqueName(t, "t")
	adm := kadm.NewClient(brokerctlClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
	cancel()

	for _, restart := range [][]string{{"restart"}, {"restart", "--hard"}} {
		if got := must(restart...); got != addr {
			t.Fatalf("brokerctl %s: broker at %s, want the same address %s", strings.Join(restart, " "), got, addr)
		}
		// The admin client made before the restart reconnects to the same
		// address and finds the topic.
		ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
		topics, err := adm.ListTopics(ctx, topic)
		cancel()
		if err != nil || !topics.Has(topic) {
			t.Fatalf("after brokerctl %s: topic %s: %v (listed %v)", strings.Join(restart, " "), topic, err, topics.Names())
		}
	}

	must("pause")
	if _, err := ctl("status"); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("status of a paused broker = %v, want a failure that says it is paused", err)
	}
	must("resume")
	// A resumed broker catches up on its timers first; give it a moment.
	for deadline := time.Now().Add(15 * time.Second); ; {
		got, err := ctl("status")
		if err == nil && got == addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after resume = %q, %v; want %s", got, err, addr)
		}
		time.Sleep(200 * time.Millisecond)
	}

	must("down")
	if _, err := ctl("start"); err == nil || !strings.Contains(err.Error(), "Down forgot") {
		t.Fatalf("start after down = %v, want a refusal: down forgets the broker", err)
	}
}

func brokerctlClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func brokerctlLogTail(stateDir string) string {
	return (&testbroker.Config{StateDir: stateDir}).LogTail(30)
}
