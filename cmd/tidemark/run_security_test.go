package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/security"
)

func TestRunSecurityConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		env              map[string]string
	}{
		{"unknown mechanism", "brokers: [k:9092]\nsecurity:\n  sasl: {mechanism: SCRAM-SHA-1, username: u, password: p}\n",
			`config: security.sasl.mechanism: "SCRAM-SHA-1" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`, nil},
		{"missing CA file", "brokers: [k:9092]\nsecurity:\n  tls: {enabled: true, ca_file: /nonexistent/ca.pem}\n",
			"config: security.tls.ca_file: open /nonexistent/ca.pem: no such file or directory", nil},
		{"CA file without TLS", "brokers: [k:9092]\nsecurity:\n  tls: {ca_file: ca.pem}\n",
			"security.tls.ca_file is set but security.tls.enabled is false", nil},
		{"username required", "brokers: [k:9092]\nsecurity:\n  sasl: {mechanism: PLAIN, password: p}\n",
			"security.sasl.username is required for PLAIN", nil},
		{"password env unset", "brokers: [k:9092]\nsecurity:\n  sasl: {mechanism: PLAIN, username: u, password_env: NO_SUCH_VAR}\n",
			"security.sasl.password_env: environment variable NO_SUCH_VAR is unset or empty", nil},
		{"misspelt security field", "brokers: [k:9092]\nsecurity:\n  tls: {cafile: ca.pem}\n", "cafile", nil},
		{"bad TIDEMARK_TLS", "brokers: [k:9092]\n", "TIDEMARK_TLS", map[string]string{"TIDEMARK_TLS": "sometimes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			cfg, err := resolveServiceConfig(writeFile(t, "tidemark.yaml", tc.file), getenv, nil, serviceConfig{})
			if err == nil {
				_, err = cfg.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRunSecurityLayersFileEnvAndFlags(t *testing.T) {
	dir := t.TempDir()
	ca := kafkatest.NewCA(t, "ca")
	caFile := kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)
	passFile := kafkatest.WriteFile(t, dir, "pass", []byte("from-file\n"))
	path := writeFile(t, "tidemark.yaml", "brokers: [k:9093]\nsecurity:\n"+
		"  tls: {enabled: true, ca_file: "+caFile+", server_name: from-file}\n"+
		"  sasl: {mechanism: PLAIN, username: file-user, password: in-the-file}\n")

	// The file alone.
	cfg, err := resolveServiceConfig(path, func(string) string { return "" }, nil, serviceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := security.Config{TLS: security.TLS{Enabled: true, CAFile: caFile, ServerName: "from-file"},
		SASL: security.SASL{Mechanism: "PLAIN", Username: "file-user", Password: "in-the-file"}}
	if cfg.Security != want {
		t.Fatalf("from the file: %+v, want %+v", cfg.Security, want)
	}

	// The environment over the file, flags over both; a password source
	// given later replaces the file's password instead of clashing with it.
	cmd := newRunCmd()
	args := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-password-file", passFile, "--tls-server-name", "from-flag"}
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	f := defaultServiceConfig()
	f.Security.SASL.Mechanism, f.Security.SASL.PasswordFile, f.Security.TLS.ServerName = "SCRAM-SHA-512", passFile, "from-flag"
	env := map[string]string{"TIDEMARK_SASL_USERNAME": "env-user", "TIDEMARK_TLS_SERVER_NAME": "from-env"}
	cfg, err = resolveServiceConfig(path, func(k string) string { return env[k] }, cmd.Flags(), f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	want = security.Config{TLS: security.TLS{Enabled: true, CAFile: caFile, ServerName: "from-flag"},
		SASL: security.SASL{Mechanism: "SCRAM-SHA-512", Username: "env-user", PasswordFile: passFile}}
	if s.cfg.Security != want {
		t.Fatalf("layered: %+v, want %+v", s.cfg.Security, want)
	}
	// The service's App carries the settings.
	app, err := s.app(&bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Config().Security; got != want {
		t.Fatalf("App security %+v, want %+v", got, want)
	}
}

// TestRunOverSASL runs `tidemark run` against a broker's SASL_PLAINTEXT
// listener only, password from a file: it creates its topics and
// processes inventory events; with a wrong password it fails at once
// naming the authentication failure.
func TestRunOverSASL(t *testing.T) {
	b := kafkatest.PrivateBrokerListeners(t, map[string]string{
		"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`user_admin="secret" user_alice="alice-secret";`,
	}, map[string]string{"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
	sasl := b.Listener("SASL_PLAINTEXT")
	dir := t.TempDir()
	run := func(ctx context.Context, logs *bytes.Buffer, password string) error {
		cmd := newRunCmd()
		cmd.SetOut(logs)
		cmd.SetErr(logs)
		cmd.SetArgs([]string{"--brokers", sasl, "--sasl-mechanism", "PLAIN", "--sasl-username", "alice",
			"--sasl-password-file", kafkatest.WriteFile(t, dir, "password", []byte(password+"\n")),
			"--create-topics", "--partitions", "2", "--pipelines", pipelines.Inventory,
			"--state-dir", t.TempDir(), "--http", "127.0.0.1:0", "--log-level", "info"}) // logs shown on failure
		return cmd.ExecuteContext(ctx)
	}

	t.Run("wrong password", func(t *testing.T) {
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err := run(ctx, &logs, "wrong")
		t.Logf("tidemark run after %s: %v", time.Since(start).Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") || time.Since(start) > 20*time.Second {
			t.Fatalf("tidemark run with a wrong password: %v after %s, want SASL_AUTHENTICATION_FAILED at once", err, time.Since(start))
		}
	})

	t.Run("processes inventory events", func(t *testing.T) {
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- run(ctx, &logs, "alice-secret") }()

		recs := inventoryEvents(t, 50)
		cl := b.Client(kgo.ConsumeTopics(pipelines.DefaultOutputs.Availability),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		// The topics appear once the service created them, through SASL.
		adm := kadm.NewClient(cl)
		deadline := time.Now().Add(60 * time.Second)
		for {
			select {
			case rerr := <-done:
				t.Fatalf("tidemark run returned early: %v\nlogs:\n%s", rerr, logs.String())
			default:
			}
			lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
			td, err := adm.ListTopics(lctx, gen.DefaultTopics.Inventory, pipelines.DefaultOutputs.Availability)
			lcancel()
			if err == nil && td.Has(gen.DefaultTopics.Inventory) && td.Has(pipelines.DefaultOutputs.Availability) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("topics not created within 60s: %v\nlogs:\n%s", err, logs.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.ProduceSync(pctx, recs...).FirstErr()
		pcancel()
		if err != nil {
			t.Fatalf("produce inventory events: %v", err)
		}
		if pollUntilAny(ctx, cl, deadline) == 0 {
			t.Fatalf("no availability output within 60s\nlogs:\n%s", logs.String())
		}
		stopService(t, cancel, done, &logs)
	})
}
