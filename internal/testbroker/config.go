package testbroker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// KafkaVersion is the Apache Kafka release the test broker runs. It must match
// kafka.version in pom.xml.
const KafkaVersion = "4.1.1"

// Config says where the broker keeps its files. Zero fields take defaults
// from EnsureDefaults.
type Config struct {
	// RepoRoot is the tidemark checkout; pom.xml is read from
	// RepoRoot/internal/testbroker.
	RepoRoot string
	// StateDir holds server.properties (which fixes the ports), data/,
	// logs/, pid and bootstrap. Up formats it afresh; Start, Stop, Restart,
	// Kill, Pause and Resume act on the broker recorded in it.
	// Default: RepoRoot/.kafka (git-ignored).
	StateDir string
	// LibDir is where Maven copies the jars. Default:
	// $XDG_CACHE_HOME/tidemark/kafka-<version>/lib, or ~/.cache/... .
	LibDir string
	// Java and Maven executables. Defaults: "java", "mvn".
	Java, Maven string
	// HeapMB is the JVM heap. Default 512.
	HeapMB int
	// ReadyTimeout bounds the wait for the first client round trip. Default 60s.
	ReadyTimeout time.Duration
	// StopTimeout is how long Down and Stop wait after SIGTERM before
	// SIGKILL. Default 20s.
	StopTimeout time.Duration
	// Properties are extra server properties, written after (and so
	// overriding) the defaults; tests use them to provoke broker
	// behaviour, e.g. add.partitions.to.txn.retry.backoff.max.ms=0.
	Properties map[string]string
	// Listeners are extra client listeners, listener name (e.g.
	// SASL_PLAINTEXT, as in listener.name.sasl_plaintext.* properties) to
	// security protocol (SASL_PLAINTEXT, SSL, SASL_SSL). Up gives each a
	// free port on 127.0.0.1 and reports the addresses in
	// Running.Listeners; the PLAINTEXT listener (Bootstrap), the
	// controller and inter-broker traffic stay PLAINTEXT. Their security
	// settings go in Properties.
	Listeners map[string]string
}

// EnsureDefaults fills zero fields. It finds RepoRoot by walking up from the
// working directory to the directory holding go.mod.
func (c *Config) EnsureDefaults() error {
	if c.RepoRoot == "" {
		root, err := FindRepoRoot()
		if err != nil {
			return err
		}
		c.RepoRoot = root
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir(c.RepoRoot)
	}
	// Absolute, so the broker's command line names the same server.properties
	// whatever directory a later Kill or Start runs from (see brokerPID).
	if abs, err := filepath.Abs(c.StateDir); err == nil {
		c.StateDir = abs
	}
	if c.LibDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("broker: no cache dir for the Kafka jars (set LibDir): %w", err)
		}
		c.LibDir = filepath.Join(cache, "tidemark", "kafka-"+KafkaVersion, "lib")
	}
	if c.Java == "" {
		c.Java = "java"
	}
	if c.Maven == "" {
		c.Maven = "mvn"
	}
	if c.HeapMB == 0 {
		c.HeapMB = 512
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 60 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 20 * time.Second
	}
	if c.HeapMB < 128 {
		return fmt.Errorf("broker: HeapMB %d is below the 128 MiB a broker needs", c.HeapMB)
	}
	return nil
}

// DefaultStateDir is where Up records a running broker: TIDEMARK_KAFKA_DIR
// if set, else <repo>/.kafka.
func DefaultStateDir(repoRoot string) string {
	if d := os.Getenv("TIDEMARK_KAFKA_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, ".kafka")
}

// FindRepoRoot walks up from the working directory to the nearest go.mod.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("broker: working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("broker: no go.mod above the working directory; run from the tidemark checkout")
		}
		dir = parent
	}
}

func (c *Config) bootstrapFile() string { return filepath.Join(c.StateDir, "bootstrap") }
func (c *Config) pidFile() string       { return filepath.Join(c.StateDir, "pid") }
func (c *Config) dataDir() string       { return filepath.Join(c.StateDir, "data") }
func (c *Config) logDir() string        { return filepath.Join(c.StateDir, "logs") }
func (c *Config) propsFile() string     { return filepath.Join(c.StateDir, "server.properties") }
func (c *Config) log4jFile() string     { return filepath.Join(c.StateDir, "log4j2.properties") }

// metaFile is written by the storage tool's format: its presence is what
// makes the data directory a broker that Start can bring back.
func (c *Config) metaFile() string { return filepath.Join(c.dataDir(), "meta.properties") }

// LogFile is the broker's console log; failures point here. Up truncates
// it; Start appends, so the log of the broker's earlier lives is kept.
func (c *Config) LogFile() string { return filepath.Join(c.logDir(), "broker.log") }

// LogTail returns the last lines of LogFile, for failure messages.
func (c *Config) LogTail(lines int) string { return tailFile(c.LogFile(), lines) }
