// Package security configures how tidemark's Kafka clients reach a secured
// cluster: TLS (a CA, a client certificate for mutual TLS, a server name)
// and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). Config is what a config
// file holds; ClientOpts turns it into franz-go options, naming the field
// at fault in every error (security.tls.ca_file, security.sasl.mechanism,
// ...). The zero Config is a plaintext, unauthenticated connection.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is the security of every connection to the brokers.
type Config struct {
	TLS  TLS  `yaml:"tls" json:"tls"`
	SASL SASL `yaml:"sasl" json:"sasl"`
}

// TLS configures encrypted connections. Its fields other than Enabled
// need Enabled, so that a CA file alone does not quietly leave the
// connection in plaintext.
type TLS struct {
	// Enabled turns TLS on. Without CAFile the system roots verify the
	// brokers' certificates.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// CAFile holds the PEM certificates of the CAs that sign the brokers'
	// certificates, in place of the system roots.
	CAFile string `yaml:"ca_file" json:"ca_file"`
	// CertFile and KeyFile are this client's PEM certificate chain and
	// private key, for brokers that require client certificates (mTLS).
	// Both or neither.
	CertFile string `yaml:"cert_file" json:"cert_file"`
	KeyFile  string `yaml:"key_file" json:"key_file"`
	// ServerName is the name the brokers' certificates must carry.
	// Default: the host of each broker address.
	ServerName string `yaml:"server_name" json:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. For tests only:
	// it gives up the protection against a man in the middle.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify"`
}

// SASL configures authentication. The password comes from exactly one of
// Password, PasswordEnv and PasswordFile; the last two keep it out of the
// config file and the process list.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Empty: no SASL.
	Mechanism string `yaml:"mechanism" json:"mechanism"`
	Username  string `yaml:"username" json:"username"`
	Password  string `yaml:"password" json:"password"`
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string `yaml:"password_env" json:"password_env"`
	// PasswordFile is a file holding the password; one trailing newline
	// is ignored.
	PasswordFile string `yaml:"password_file" json:"password_file"`
}

// Mechanisms are the SASL mechanisms SASL.Mechanism accepts.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// IsZero reports whether c asks for neither TLS nor SASL.
func (c Config) IsZero() bool { return c == Config{} }

// Validate checks c as ClientOpts would use it, reading the files it
// names, and names the field at fault.
func (c Config) Validate() error {
	_, err := c.ClientOpts()
	return err
}

// ClientOpts returns the franz-go options for c: kgo.DialTLSConfig and
// kgo.SASL, or nothing for the zero Config. It reads the files c names
// (and the password's environment variable) now.
func (c Config) ClientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	m, err := c.SASL.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// Config builds the *tls.Config, or returns nil when TLS is off.
func (t TLS) Config() (*tls.Config, error) {
	if !t.Enabled {
		for _, f := range []struct {
			name string
			set  bool
		}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
			{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				return nil, fmt.Errorf("security.tls.%s is set but security.tls.enabled is false: enable TLS or remove it", f.name)
			}
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("security.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("security.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return nil, errors.New("security.tls.key_file is required with security.tls.cert_file")
	case t.CertFile == "" && t.KeyFile != "":
		return nil, errors.New("security.tls.cert_file is required with security.tls.key_file")
	case t.CertFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("security.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// mechanism builds the SASL mechanism, or returns nil when SASL is off.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	if s.Mechanism == "" {
		if s != (SASL{}) {
			return nil, fmt.Errorf("security.sasl.mechanism is required when other security.sasl fields are set: one of %s", strings.Join(Mechanisms, ", "))
		}
		return nil, nil
	}
	mech := strings.ToUpper(s.Mechanism)
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, fmt.Errorf("security.sasl.mechanism: %q is not one of %s", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
	if s.Username == "" {
		return nil, fmt.Errorf("security.sasl.username is required for %s", mech)
	}
	pass, err := s.password()
	if err != nil {
		return nil, err
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: s.Username, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// password reads the password from the one source that is set.
func (s SASL) password() (string, error) {
	n := 0
	for _, v := range []string{s.Password, s.PasswordEnv, s.PasswordFile} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return "", errors.New("security.sasl.password, password_env and password_file exclude each other: set one")
	}
	switch {
	case s.Password != "":
		return s.Password, nil
	case s.PasswordEnv != "":
		p := os.Getenv(s.PasswordEnv)
		if p == "" {
			return "", fmt.Errorf("security.sasl.password_env: environment variable %s is unset or empty", s.PasswordEnv)
		}
		return p, nil
	case s.PasswordFile != "":
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("security.sasl.password_file: %w", err)
		}
		p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if p == "" {
			return "", fmt.Errorf("security.sasl.password_file: %s is empty", s.PasswordFile)
		}
		return p, nil
	}
	return "", errors.New("security.sasl.password is required (or password_env naming an environment variable, or password_file)")
}
