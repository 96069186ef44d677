package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		env              map[string]string
	}{
		{"brokers are required", "", "brokers is required", nil},
		{"unknown commit policy", "brokers: [k:9092]\ncommit_policy: sometimes\n", `commit_policy "sometimes"`, nil},
		{"commit interval must be a duration", "brokers: [k:9092]\ncommit_interval: soon\n", `commit_interval "soon"`, nil},
		// The commit settings' range errors named frontier's Go fields
		// (FixedInterval, MaxInterval, StalenessTarget).
		{"fixed interval out of range", "brokers: [k:9092]\ncommit_policy: fixed\ncommit_interval: 2h\n", "commit_interval 2h0m0s: the fixed policy's period, accepted range 1ms..1h0m0s", nil},
		{"adaptive interval out of range", "brokers: [k:9092]\ncommit_interval: 2ms\n", "commit_interval 2ms: the adaptive policy's longest interval", nil},
		{"staleness target out of range", "brokers: [k:9092]\nstaleness_target: 2h\n", "staleness_target 2h0m0s: accepted range 1ms..1h0m0s", nil},
		// A zero that the library reads as "the default" ran with the
		// default: ship_within: 0s alerted after 1m, while 500ms was
		// refused as below 1s.
		{"a zero commit interval is not taken for the default", "brokers: [k:9092]\ncommit_policy: fixed\ncommit_interval: 0s\n", `commit_interval "0s": want a positive duration`, nil},
		{"a zero staleness target is not taken for the default", "brokers: [k:9092]\nstaleness_target: 0s\n", `staleness_target "0s": want a positive duration`, nil},
		{"a zero ship_within is not taken for the default", "brokers: [k:9092]\nship_within: 0s\n", `ship_within "0s": want a positive duration`, nil},
		{"a zero price_history is not taken for the default", "brokers: [k:9092]\nprice_history: 0s\n", `price_history "0s": want a positive duration`, nil},
		{"a zero cart_ttl is not taken for the default", "brokers: [k:9092]\ncart_ttl: 0s\n", `cart_ttl "0s": want a positive duration`, nil},
		{"a zero cart_totals_every is not taken for the default", "brokers: [k:9092]\ncart_totals_every: 0s\n", `cart_totals_every "0s": want a positive duration`, nil},
		{"unknown guarantee", "brokers: [k:9092]\nguarantee: maybe_once\n", `guarantee "maybe_once"`, nil},
		{"unknown pipeline", "brokers: [k:9092]\npipelines: [inventory, shipping]\n", `pipelines: pipeline "shipping"`, nil},
		{"misspelt field in the file", "brokers: [k:9092]\nstaleness_targt: 1s\n", "staleness_targt", nil},
		{"wrong type in the file", "brokers: [k:9092]\npartitions: many\n", "partitions: want a whole number, got string", nil},
		{"wrong type in a nested field", "brokers: [k:9092]\nsecurity:\n  tls:\n    ca_file: [a, b]\n", "security.tls.ca_file: want a string, got array", nil},
		{"a scalar where a list belongs", "brokers: k:9092\n", "brokers: want a list, got string", nil},
		{"partitions out of range", "brokers: [k:9092]\npartitions: 0\n", "partitions 0", nil},
		{"dead letter and skip exclude each other", "brokers: [k:9092]\ndead_letter_topic: dlq\nskip_undecodable: true\n", "dead_letter_topic and skip_undecodable", nil},
		{"bad environment value names the variable", "brokers: [k:9092]\n", "TIDEMARK_CREATE_TOPICS", map[string]string{"TIDEMARK_CREATE_TOPICS": "perhaps"}},
		{"environment overrides the file", "brokers: [k:9092]\n", `staleness_target "fast"`, map[string]string{"TIDEMARK_STALENESS_TARGET": "fast"}},
		{"a broker given as a URL", "brokers: [\"http://localhost:9092\"]\n", `brokers "http://localhost:9092": want host:port`, nil},
		{"a broker without a port", "brokers: [kafka]\n", `brokers "kafka": want host:port`, nil},
		{"an application id Kafka refuses in topic names", "brokers: [k:9092]\napplication: bad name/with slash\n", `application id "bad name/with slash"`, nil},
		// A bad instance id was found only when the App was built, and
		// the error named the Go field (config: InstanceID).
		{"an instance id Kafka refuses", "brokers: [k:9092]\ninstance_id: a/b\n", `config: instance_id: instance id "a/b"`, nil},
		{"a zero grace is not taken for the default", "brokers: [k:9092]\ngrace: 0s\n", `grace "0s": the pipelines need a positive grace`, nil},
		{"the peer detector needs http", "brokers: [k:9092]\nhttp: \"\"\npeer_dead_after: 2s\n", "peer_dead_after 2s needs http", nil},
		// The pipelines' range checks named their Go fields (ShipWithin,
		// PriceHistory), which a tidemark run user never wrote.
		{"ship_within out of range", "brokers: [k:9092]\nship_within: 500ms\n", "ship_within is 500ms, accepted range 1s..720h", nil},
		{"price_history below grace", "brokers: [k:9092]\nprice_history: 1s\n", "price_history is 1s, accepted range grace (5s)..720h", nil},
		{"grace out of range", "brokers: [k:9092]\ngrace: 25h\n", "grace is 25h0m0s", nil},
		{"cart_ttl out of range", "brokers: [k:9092]\ncart_ttl: 10ms\n", "cart_ttl is 10ms", nil},
		{"cart_totals_every out of range", "brokers: [k:9092]\ncart_totals_every: 2h\n", "cart_totals_every is 2h0m0s", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, "tidemark.yaml", tc.file)
			}
			getenv := func(k string) string { return tc.env[k] }
			cfg, err := resolveServiceConfig(path, getenv, nil, serviceConfig{})
			if err == nil {
				_, err = cfg.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestRunConfigLayersFileEnvAndFlags(t *testing.T) {
	path := writeFile(t, "tidemark.json", `{"brokers": ["file:9092"], "commit_policy": "fixed", "commit_interval": "50ms", "state_dir": "/from/file"}`)
	cmd := newRunCmd()
	if err := cmd.Flags().Parse([]string{"--commit-interval", "20ms"}); err != nil {
		t.Fatal(err)
	}
	f := defaultServiceConfig()
	f.CommitInterval = "20ms"
	env := map[string]string{"TIDEMARK_STATE_DIR": "/from/env"}
	cfg, err := resolveServiceConfig(path, func(k string) string { return env[k] }, cmd.Flags(), f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Brokers[0] != "file:9092" || s.cfg.StateDir != "/from/env" || s.commit.FixedInterval != 20*time.Millisecond {
		t.Fatalf("brokers %v (want from the file), state dir %q (want from env), fixed interval %v (want the flag's 20ms)",
			s.cfg.Brokers, s.cfg.StateDir, s.commit.FixedInterval)
	}
}

// A short run of the service on the embedded broker: it creates its
// topics, processes generated inventory events, and stops cleanly when
// its context is cancelled (what SIGTERM does through main's context).
func TestRunServiceProcessesAndStopsCleanly(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cfg := defaultServiceConfig()
	cfg.Brokers, cfg.StateDir, cfg.HTTP = brokers, t.TempDir(), "127.0.0.1:0"
	cfg.Pipelines, cfg.CreateTopics, cfg.Partitions, cfg.LogLevel = []string{pipelines.Inventory}, true, 2, "warn"
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, &logs) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(pipelines.DefaultOutputs.Availability),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := inventoryEvents(t, 50)
	deadline := time.Now().Add(30 * time.Second)
	produceOnceCreated(ctx, t, cl, recs, deadline, &logs) // the topics appear once the service created them
	if pollUntilAny(ctx, cl, deadline) == 0 {
		t.Fatalf("no availability output within 30s\nlogs:\n%s", logs.String())
	}
	stopService(t, cancel, done, &logs)
}
