package testbroker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ensureJars makes LibDir hold the broker classpath, running Maven only when
// it is missing. Maven writes into a temporary sibling that is renamed into
// place, so an interrupted download never leaves a half-filled LibDir that
// later runs would trust.
func (c *Config) ensureJars(ctx context.Context, progress func(string)) error {
	if ok, _ := filepath.Glob(filepath.Join(c.LibDir, "kafka_2.13-*.jar")); len(ok) > 0 {
		return nil
	}
	progress(fmt.Sprintf("resolving Apache Kafka %s jars from Maven Central into %s", KafkaVersion, c.LibDir))
	if err := os.MkdirAll(filepath.Dir(c.LibDir), 0o755); err != nil {
		return fmt.Errorf("broker: jar cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(c.LibDir), "lib-partial-")
	if err != nil {
		return fmt.Errorf("broker: jar cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	pom := filepath.Join(c.RepoRoot, "internal", "testbroker", "pom.xml")
	cmd := exec.CommandContext(ctx, c.Maven, "-B", "-q", "-f", pom,
		"dependency:copy-dependencies", "-Dlib.dir="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("broker: %s dependency:copy-dependencies (needs Maven and access to Maven Central): %w\n%s",
			c.Maven, err, tail(string(out), 40))
	}
	if ok, _ := filepath.Glob(filepath.Join(tmp, "kafka_2.13-*.jar")); len(ok) == 0 {
		return fmt.Errorf("broker: Maven finished but copied no kafka_2.13 jar into %s", tmp)
	}
	if err := os.RemoveAll(c.LibDir); err != nil {
		return fmt.Errorf("broker: jar cache: %w", err)
	}
	if err := os.Rename(tmp, c.LibDir); err != nil {
		return fmt.Errorf("broker: jar cache: %w", err)
	}
	return nil
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
