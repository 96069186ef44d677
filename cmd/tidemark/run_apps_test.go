package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

// apps: entries inherit the top-level settings and override theirs.
func TestRunConfigApps(t *testing.T) {
	path := writeFile(t, "tidemark.yaml", `brokers: [k:9092]
staleness_target: 2s
pipelines: [inventory]
tenant_classes: {gold: {staleness_target: 20ms, tenants: [s1]}}
apps:
  - {application: shop-gold, topic_prefix: gold., http: ":8081", staleness_target: 50ms}
  - application: shop-std
    topic_prefix: std.
    http: ":8082"
    commit_policy: fixed
    commit_interval: 1s
    tenant_classes: {}
`)
	cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, defaultServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.apps) != 2 {
		t.Fatalf("%d apps, want 2", len(s.apps))
	}
	gold, std := s.apps[0], s.apps[1]
	if gold.cfg.Application != "shop-gold" || gold.commit.StalenessTarget != 50*time.Millisecond ||
		gold.commit.Tenants["s1"].StalenessTarget != 20*time.Millisecond || gold.cfg.Brokers[0] != "k:9092" ||
		gold.pipelines.Inputs.Inventory != "gold.inventory" && !strings.HasPrefix(gold.pipelines.Inputs.Inventory, "gold.") {
		t.Fatalf("gold app: %+v commit %+v inputs %+v", gold.cfg, gold.commit, gold.pipelines.Inputs)
	}
	if std.commit.Policy != frontier.PolicyFixed || std.commit.FixedInterval != time.Second || len(std.commit.Tenants) != 0 ||
		std.commit.StalenessTarget != 2*time.Second || !strings.HasPrefix(std.pipelines.Inputs.Inventory, "std.") {
		t.Fatalf("std app: %+v commit %+v", std.cfg, std.commit)
	}
	if len(cfg.TenantClasses) != 1 {
		t.Fatalf("the top-level tenant_classes changed: %v", cfg.TenantClasses)
	}
}

func TestRunConfigAppsErrors(t *testing.T) {
	for _, tc := range []struct{ name, apps, want string }{
		{"same application", "[{application: a, http: ':1'}, {application: a, http: ':2'}]", `both have application "a"`},
		{"same http", "[{application: a, http: ':1'}, {application: b, http: ':1'}]", `both serve http on ":1"`},
		{"unknown key", "[{application: a, colour: blue}]", "colour"},
		{"nested", "[{application: a, apps: [{application: b}]}]", "apps cannot nest"},
		{"bad field names the app", "[{application: a, commit_interval: soon}]", `apps[0] (a): config: commit_interval "soon"`},
		{"wrong type names the field", "[{application: a, partitions: [1]}]", "apps[0]: partitions: want a whole number, got array"},
		{"an entry that is not a mapping", "[shop-gold]", "apps[0]: want a mapping of settings, got a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "tidemark.yaml", "brokers: [k:9092]\napps: "+tc.apps+"\n")
			cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, defaultServiceConfig())
			if err == nil {
				_, err = cfg.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Two apps of one `tidemark run` (gold. and std. topics) on the embedded
// broker: each processes its own inventory events and both stop together
// when the context is cancelled.
func TestRunServiceRunsSeveralApps(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	dir := t.TempDir()
	path := writeFile(t, "tidemark.yaml", `pipelines: [inventory]
create_topics: true
partitions: 2
log_level: warn
apps:
  - {application: shop-gold, topic_prefix: gold., http: "127.0.0.1:0", staleness_target: 50ms}
  - {application: shop-std, topic_prefix: std., http: "127.0.0.1:0", commit_policy: fixed, commit_interval: 200ms}
`)
	cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, defaultServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Brokers, cfg.StateDir = brokers, dir
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, &logs) }()

	events := inventoryEvents(t, 30)
	for _, prefix := range []string{"gold.", "std."} {
		in := gen.DefaultTopics.WithPrefix(prefix).Inventory
		out := pipelines.DefaultOutputs.WithPrefix(prefix).Availability
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for _, e := range events {
			c := *e
			c.Topic = in
			recs = append(recs, &c)
		}
		deadline := time.Now().Add(30 * time.Second)
		produceOnceCreated(ctx, t, cl, recs, deadline, &logs) // the topics appear once the service created them
		got := pollUntilAny(ctx, cl, deadline)
		cl.Close()
		if got == 0 {
			t.Fatalf("no %s output within 30s\nlogs:\n%s", out, logs.String())
		}
	}
	stopService(t, cancel, done, &logs)
	for _, app := range []string{"shop-gold", "shop-std"} {
		if m, _ := filepath.Glob(filepath.Join(dir, app, "*")); len(m) == 0 {
			t.Errorf("no state in %s", filepath.Join(dir, app))
		}
	}
}
