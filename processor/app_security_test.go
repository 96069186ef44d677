package processor_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/security"
)

// securedBroker starts a private broker with, beside its PLAINTEXT
// listener: SASL_PLAINTEXT (PLAIN users admin and alice, SCRAM-SHA-256 for
// users created with kadm), SSL with a certificate ca signs, MTLS (SSL
// requiring a client certificate ca signs) and SASL_SSL (SCRAM-SHA-512).
func securedBroker(t *testing.T, ca *kafkatest.CA) *kafkatest.Private {
	t.Helper()
	cert, key := ca.Issue("broker")
	inline := func(pem []byte) string { return strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", `\n`) }
	props := map[string]string{
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":       "SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required ` +
			`user_admin="secret" user_alice="alice-secret";`,
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":       "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.mtls.ssl.client.auth":                          "required",
		"listener.name.mtls.ssl.truststore.type":                      "PEM",
		"listener.name.mtls.ssl.truststore.certificates":              inline(ca.CertPEM),
	}
	for _, l := range []string{"ssl", "mtls", "sasl_ssl"} {
		props["listener.name."+l+".ssl.keystore.type"] = "PEM"
		props["listener.name."+l+".ssl.keystore.certificate.chain"] = inline(cert)
		props["listener.name."+l+".ssl.keystore.key"] = inline(key)
	}
	return kafkatest.PrivateBrokerListeners(t, props, map[string]string{
		"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_SSL": "SASL_SSL"})
}

// TestSecuredBroker runs against one broker with SASL and TLS listeners:
// an App reaching the cluster only through SASL PLAIN counts exactly once
// and answers /frontier (so its admin, transactional, restore and frontier
// watcher clients authenticate), a wrong password fails Run
// at once naming the failure, and SCRAM-SHA-256, TLS (right and wrong
// CA), mutual TLS and SCRAM-SHA-512 over TLS carry a produce/consume round
// trip through security.Config.
func TestSecuredBroker(t *testing.T) {
	ca := kafkatest.NewCA(t, "tidemark-test-ca")
	b := securedBroker(t, ca)
	saslAddr, sslAddr := b.Listener("SASL_PLAINTEXT"), b.Listener("SSL")
	plain := b.Client() // PLAINTEXT: topics, input, and reading the output
	adm := kadm.NewClient(plain)
	ctx := context.Background()
	newTopic := func(name string, partitions int32) string {
		t.Helper()
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return name
	}

	t.Run("app over SASL PLAIN counts exactly once", func(t *testing.T) {
		in, out := newTopic("sasl-in", 2), newTopic("sasl-out", 2)
		want := map[string]int{}
		var recs []*kgo.Record
		for i := range 400 {
			k := fmt.Sprintf("sku-%02d", i%10)
			want[k]++
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
				Partition: processor.DefaultPartition([]byte(k), 2)})
		}
		pl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := pl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		app, err := processor.NewApp(countTopology(t, "sasl-app", in, out),
			processor.WithBrokers(saslAddr), processor.WithStateDir(t.TempDir()), processor.WithHTTP("127.0.0.1:0"),
			processor.WithSecurity(security.Config{SASL: security.SASL{Mechanism: "PLAIN", Username: "alice", Password: "alice-secret"}}))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- app.Run(rctx) }()
		checkCountRecords(t, consumeExactly(t, b, out, len(recs), time.Minute, 2*time.Second), want)
		// /frontier syncs the frontier watcher, a client of its own, first.
		var fr struct {
			Sinks map[string]struct {
				Partitions []struct {
					Offset int64 `json:"offset"`
				} `json:"partitions"`
			} `json:"sinks"`
		}
		getJSON(t, "http://"+app.HTTPAddr()+"/frontier", &fr)
		var committed int64
		for _, p := range fr.Sinks[out].Partitions {
			committed += p.Offset
		}
		if committed != int64(len(recs)) {
			t.Fatalf("frontier of %s sums to %d offsets, want the %d outputs: %+v", out, committed, len(recs), fr)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("app did not stop within 60s")
		}
	})

	t.Run("a wrong password fails Run at once", func(t *testing.T) {
		in, out := newTopic("badpass-in", 1), newTopic("badpass-out", 1)
		app, err := processor.NewApp(countTopology(t, "badpass-app", in, out),
			processor.WithBrokers(saslAddr), processor.WithStateDir(t.TempDir()),
			processor.WithSecurity(security.Config{SASL: security.SASL{Mechanism: "PLAIN", Username: "alice", Password: "wrong"}}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		err = app.Run(rctx)
		took := time.Since(start)
		t.Logf("Run after %s: %v", took.Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("Run = %v, want a SASL authentication failure", err)
		}
		if took > 20*time.Second {
			t.Fatalf("Run took %s to fail: an authentication failure is not transient, it should not wait out the 60s StartupTimeout", took)
		}
	})

	t.Run("SCRAM-SHA-256 round trip", func(t *testing.T) {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("create SCRAM credential: %v", err)
		}
		topic := newTopic("scram", 1)
		roundTrip(t, saslAddr, topic, security.Config{SASL: security.SASL{Mechanism: "SCRAM-SHA-256", Username: "bob", Password: "bob-secret"}})
		err = dialErr(t, saslAddr, security.Config{SASL: security.SASL{Mechanism: "SCRAM-SHA-256", Username: "bob", Password: "wrong"}})
		if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("SCRAM with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("mutual TLS round trip, and no client certificate", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := ca.Issue("tidemark-client")
		caFile := kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)
		roundTrip(t, b.Listener("MTLS"), newTopic("mtls", 1), security.Config{TLS: security.TLS{Enabled: true, CAFile: caFile,
			CertFile: kafkatest.WriteFile(t, dir, "client.pem", cert), KeyFile: kafkatest.WriteFile(t, dir, "client.key", key)}})
		err := dialErr(t, b.Listener("MTLS"), security.Config{TLS: security.TLS{Enabled: true, CAFile: caFile}})
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("without a client certificate: %v, want a TLS certificate error", err)
		}
		t.Logf("without a client certificate: %v", err)
	})

	t.Run("SCRAM-SHA-512 over TLS round trip", func(t *testing.T) {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("create SCRAM credential: %v", err)
		}
		t.Setenv("TIDEMARK_TEST_KAFKA_PASSWORD", "carol-secret")
		roundTrip(t, b.Listener("SASL_SSL"), newTopic("sasl-ssl", 1), security.Config{
			TLS:  security.TLS{Enabled: true, CAFile: kafkatest.WriteFile(t, t.TempDir(), "ca.pem", ca.CertPEM)},
			SASL: security.SASL{Mechanism: "SCRAM-SHA-512", Username: "carol", PasswordEnv: "TIDEMARK_TEST_KAFKA_PASSWORD"}})
	})

	t.Run("TLS round trip and a wrong CA", func(t *testing.T) {
		dir := t.TempDir()
		topic := newTopic("tls", 1)
		roundTrip(t, sslAddr, topic, security.Config{TLS: security.TLS{Enabled: true,
			CAFile: kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)}})
		other := kafkatest.NewCA(t, "another-ca")
		err := dialErr(t, sslAddr, security.Config{TLS: security.TLS{Enabled: true,
			CAFile: kafkatest.WriteFile(t, dir, "other.pem", other.CertPEM)}})
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("TLS with another CA: %v, want certificate signed by unknown authority", err)
		}
	})
}

// secureClient is a client on addr with sec's options and opts.
func secureClient(t *testing.T, addr string, sec security.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	so, err := sec.ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addr)}, so...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// roundTrip produces a record to topic and reads it back, both through
// clients built from sec.
func roundTrip(t *testing.T, addr, topic string, sec security.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := secureClient(t, addr, sec)
	var err error
	for { // a SCRAM credential takes a moment to reach the listener
		if err = p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("secret handshake")}).FirstErr(); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	c := secureClient(t, addr, sec, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := c.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "secret handshake" {
		t.Fatalf("consumed %d records, want the one produced", len(recs))
	}
}

// dialErr is the error of a first request through a client built from sec.
func dialErr(t *testing.T, addr string, sec security.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := secureClient(t, addr, sec, kgo.RequestRetries(0)).Ping(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no answer within 20s: %v", err)
	}
	return err
}

// consumeExactly reads n records of topic from b's PLAINTEXT listener,
// read_committed, then fails if more arrive within quiet.
func consumeExactly(t *testing.T, b *kafkatest.Private, topic string, n int, timeout, quiet time.Duration) []*kgo.Record {
	t.Helper()
	c := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []*kgo.Record
	poll := func(ctx context.Context) bool {
		fs := c.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		return ctx.Err() == nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for len(got) < n {
		if !poll(ctx) {
			t.Fatalf("topic %s: want %d records, read %d after %s", topic, n, len(got), timeout)
		}
	}
	qctx, qcancel := context.WithTimeout(context.Background(), quiet)
	defer qcancel()
	for poll(qctx) {
	}
	if len(got) != n {
		t.Fatalf("topic %s: want exactly %d records, got %d", topic, n, len(got))
	}
	return got
}
