package processor_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestSeveralAppsInOneProcess runs two Apps, a gold and a standard tenant
// class, in one process through RunApps: each has its own application id
// (group), state dir, memory budget, HTTP server and controller options
// (gold adaptive with a 50 ms staleness target and two stream threads,
// standard fixed at 300 ms).
// Both count their inputs exactly once against the reference, both answer
// interactive queries and serve their own /metrics, and cancelling the
// shared context stops both cleanly.
func TestSeveralAppsInOneProcess(t *testing.T) {
	t.Parallel()
	type class struct {
		name    string
		id      string
		in, out string
		app     *processor.App
		want    map[string]int
	}
	classes := []*class{{name: "gold"}, {name: "standard"}}
	opts := map[string][]processor.Option{
		"gold": {processor.WithMemoryBudget(32 << 20), processor.WithThreads(2),
			processor.WithCommitPolicy(frontier.Options{StalenessTarget: 50 * time.Millisecond})},
		"standard": {processor.WithMemoryBudget(48 << 20),
			processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 300 * time.Millisecond})},
	}
	var apps []*processor.App
	for _, c := range classes {
		c.in, c.out = kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
		c.id = kafkatest.UniqueName(t, c.name)
		app, err := processor.NewApp(countTopology(t, c.id, c.in, c.out),
			append([]processor.Option{processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()),
				processor.WithHTTP("127.0.0.1:0")}, opts[c.name]...)...)
		if err != nil {
			t.Fatal(err)
		}
		c.app = app
		apps = append(apps, app)
	}
	if got := classes[0].app.Config().State.MemoryBudget; got != 32<<20 {
		t.Fatalf("gold memory budget %d, want 32 MiB", got)
	}
	if got := classes[1].app.Config().Commit.Policy; got != frontier.PolicyFixed {
		t.Fatalf("standard commit policy %q, want fixed", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- processor.RunApps(ctx, apps...) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunApps: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("apps did not stop within 60s")
		}
	}
	t.Cleanup(stop)

	for i, c := range classes {
		c.want = produceKeys(t, c.in, 0, 120+40*i, 7)
	}
	for _, c := range classes {
		checkCounts(t, c.out, c.want)
	}
	for _, c := range classes {
		// Interactive queries, each app from its own state.
		for k, n := range c.want {
			deadline := time.Now().Add(20 * time.Second)
			for {
				res, err := c.app.Get(ctx, "counts", []byte(k))
				if err == nil && res.Found && countOf(t, res.Entries[0].Value) == int64(n) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: query %s = %+v, %v; want %d", c.name, k, res, err, n)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		// Each app serves its own metrics, labelled with its application.
		resp, err := http.Get(baseURL(t, c.app) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, other := range classes {
			has := strings.Contains(string(body), other.id)
			if resp.StatusCode != http.StatusOK || has != (other == c) {
				t.Fatalf("%s: /metrics (status %d) mentions %s: %v, want %v", c.name, resp.StatusCode, other.name, has, other == c)
			}
		}
	}
	if classes[0].app.HTTPAddr() == classes[1].app.HTTPAddr() {
		t.Fatal("both apps on one HTTP address")
	}
	stop()
}

// RunApps refuses apps that would collide: the same application id or
// state dir.
func TestRunAppsRejectsCollisions(t *testing.T) {
	t.Parallel()
	topo := countTopology(t, "same-app", "in", "out")
	dir := t.TempDir()
	a1, err := processor.NewApp(topo, processor.WithBrokers("127.0.0.1:1"), processor.WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := processor.NewApp(countTopology(t, "other-app", "in", "out"), processor.WithBrokers("127.0.0.1:1"), processor.WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := processor.RunApps(context.Background(), a1, a2); err == nil || !strings.Contains(err.Error(), "state dir") {
		t.Fatalf("RunApps = %v, want a state dir collision", err)
	}
	// One directory spelled differently.
	a4, err := processor.NewApp(countTopology(t, "third-app", "in", "out"), processor.WithBrokers("127.0.0.1:1"), processor.WithStateDir(dir+"/./"))
	if err != nil {
		t.Fatal(err)
	}
	if err := processor.RunApps(context.Background(), a1, a4); err == nil || !strings.Contains(err.Error(), "state dir") {
		t.Fatalf("RunApps = %v, want a state dir collision", err)
	}
	a3, err := processor.NewApp(topo, processor.WithBrokers("127.0.0.1:1"), processor.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := processor.RunApps(context.Background(), a1, a3); err == nil || !strings.Contains(err.Error(), "application id") {
		t.Fatalf("RunApps = %v, want an application id collision", err)
	}
}
