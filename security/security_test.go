package security

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

func TestValidateNamesTheField(t *testing.T) {
	dir := t.TempDir()
	ca := kafkatest.NewCA(t, "test-ca")
	caFile := kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)
	notPEM := kafkatest.WriteFile(t, dir, "not.pem", []byte("hello"))
	empty := kafkatest.WriteFile(t, dir, "empty", []byte("\n"))
	missing := filepath.Join(dir, "missing")
	t.Setenv("TIDEMARK_TEST_EMPTY", "")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"mechanism", Config{SASL: SASL{Mechanism: "SCRAM-SHA-1", Username: "u", Password: "p"}},
			`security.sasl.mechanism: "SCRAM-SHA-1" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`},
		{"no mechanism", Config{SASL: SASL{Username: "u"}}, "security.sasl.mechanism is required"},
		{"username", Config{SASL: SASL{Mechanism: "PLAIN", Password: "p"}}, "security.sasl.username is required for PLAIN"},
		{"no password", Config{SASL: SASL{Mechanism: "PLAIN", Username: "u"}}, "security.sasl.password is required"},
		{"two passwords", Config{SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "p", PasswordFile: empty}},
			"security.sasl.password, password_env and password_file exclude each other"},
		{"password env", Config{SASL: SASL{Mechanism: "PLAIN", Username: "u", PasswordEnv: "TIDEMARK_TEST_EMPTY"}},
			"security.sasl.password_env: environment variable TIDEMARK_TEST_EMPTY is unset or empty"},
		{"password file", Config{SASL: SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: missing}},
			"security.sasl.password_file: open " + missing + ": no such file or directory"},
		{"empty password file", Config{SASL: SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: empty}},
			"security.sasl.password_file: " + empty + " is empty"},
		{"ca file", Config{TLS: TLS{Enabled: true, CAFile: missing}}, "security.tls.ca_file: open " + missing + ": no such file or directory"},
		{"ca not pem", Config{TLS: TLS{Enabled: true, CAFile: notPEM}}, "security.tls.ca_file: " + notPEM + " holds no PEM certificate"},
		{"tls off", Config{TLS: TLS{CAFile: caFile}}, "security.tls.ca_file is set but security.tls.enabled is false"},
		{"cert without key", Config{TLS: TLS{Enabled: true, CertFile: caFile}}, "security.tls.key_file is required with security.tls.cert_file"},
		{"key without cert", Config{TLS: TLS{Enabled: true, KeyFile: caFile}}, "security.tls.cert_file is required with security.tls.key_file"},
		{"bad key pair", Config{TLS: TLS{Enabled: true, CertFile: caFile, KeyFile: notPEM}}, "security.tls.cert_file/key_file: "},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestClientOpts(t *testing.T) {
	dir := t.TempDir()
	ca := kafkatest.NewCA(t, "test-ca")
	cert, key := ca.Issue("client")
	caFile := kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)
	certFile := kafkatest.WriteFile(t, dir, "client.pem", cert)
	keyFile := kafkatest.WriteFile(t, dir, "client.key", key)
	passFile := kafkatest.WriteFile(t, dir, "pass", []byte("from-file\n"))
	t.Setenv("TIDEMARK_TEST_PASSWORD", "from-env")

	if opts, err := (Config{}).ClientOpts(); err != nil || len(opts) != 0 {
		t.Fatalf("zero Config: %d options, %v; want none", len(opts), err)
	}
	for _, s := range []SASL{
		{Mechanism: "PLAIN", Username: "u", Password: "p"},
		{Mechanism: "scram-sha-256", Username: "u", PasswordEnv: "TIDEMARK_TEST_PASSWORD"},
		{Mechanism: "SCRAM-SHA-512", Username: "u", PasswordFile: passFile},
	} {
		opts, err := Config{SASL: s}.ClientOpts()
		if err != nil || len(opts) != 1 {
			t.Fatalf("%+v: %d options, %v; want 1 (kgo.SASL)", s, len(opts), err)
		}
	}
	for _, tc := range []struct {
		src  SASL
		want string
	}{
		{SASL{PasswordEnv: "TIDEMARK_TEST_PASSWORD"}, "from-env"},
		{SASL{PasswordFile: passFile}, "from-file"},
		{SASL{Password: "inline"}, "inline"},
	} {
		if got, err := tc.src.password(); err != nil || got != tc.want {
			t.Errorf("password of %+v = %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}

	tc, err := TLS{Enabled: true, CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "localhost"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "localhost" || tc.InsecureSkipVerify || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("tls.Config = %+v", tc)
	}
	if opts, err := (Config{TLS: TLS{Enabled: true, CAFile: caFile}, SASL: SASL{Mechanism: "PLAIN", Username: "u", Password: "p"}}).ClientOpts(); err != nil || len(opts) != 2 {
		t.Fatalf("TLS and SASL: %d options, %v; want 2", len(opts), err)
	}
	if tc, err := (TLS{Enabled: true}).Config(); err != nil || tc.RootCAs != nil {
		t.Fatalf("TLS without a CA file: %+v, %v; want the system roots", tc, err)
	}
}

// TestTLSHandshake checks the built tls.Config against a local TLS server
// with a certificate of the test CA: the CA verifies it, another CA does
// not, and mutual TLS presents the client certificate.
func TestTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, other := kafkatest.NewCA(t, "test-ca"), kafkatest.NewCA(t, "other-ca")
	srvCert, srvKey := ca.Issue("broker")
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := ca.Issue("client")
	caPool := mustConfig(t, TLS{Enabled: true, CAFile: kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)}).RootCAs
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: caPool})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan int, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				peers <- len(tc.ConnectionState().PeerCertificates)
			}
			c.Close()
		}
	}()
	dial := func(cfg TLS) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), mustConfig(t, cfg))
		if err == nil {
			err = c.Handshake()
			c.Close()
		}
		return err
	}
	caFile := kafkatest.WriteFile(t, dir, "ca.pem", ca.CertPEM)
	if err := dial(TLS{Enabled: true, CAFile: caFile}); err != nil {
		t.Fatalf("handshake with the right CA: %v", err)
	}
	if n := <-peers; n != 0 {
		t.Fatalf("server saw %d client certificates, want 0", n)
	}
	err = dial(TLS{Enabled: true, CAFile: kafkatest.WriteFile(t, dir, "other.pem", other.CertPEM)})
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("handshake with another CA: %v, want certificate signed by unknown authority", err)
	}
	if err := dial(TLS{Enabled: true, CAFile: caFile, ServerName: "not-the-broker"}); err == nil || !strings.Contains(err.Error(), "not-the-broker") {
		t.Fatalf("handshake with a wrong server name: %v, want it named", err)
	}
	if err := dial(TLS{Enabled: true, InsecureSkipVerify: true}); err != nil {
		t.Fatalf("handshake skipping verification: %v", err)
	}
	<-peers
	if err := dial(TLS{Enabled: true, CAFile: caFile, CertFile: kafkatest.WriteFile(t, dir, "c.pem", clientCert),
		KeyFile: kafkatest.WriteFile(t, dir, "c.key", clientKey)}); err != nil {
		t.Fatalf("mutual TLS handshake: %v", err)
	}
	if n := <-peers; n != 1 {
		t.Fatalf("server saw %d client certificates, want 1", n)
	}
}

func mustConfig(t *testing.T, c TLS) *tls.Config {
	t.Helper()
	tc, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if tc.ServerName == "" {
		tc.ServerName = "127.0.0.1" // what franz-go sets from the broker address
	}
	return tc
}
