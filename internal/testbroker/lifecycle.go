package testbroker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Running describes a broker Up or Start started or found.
type Running struct {
	Bootstrap string
	// Listeners are the addresses of Config.Listeners, by name; only Up
	// of a fresh broker sets them.
	Listeners map[string]string
	PID       int
	// Reused is true when Up or Start found a broker that was already
	// answering (for Start: or still starting).
	Reused bool
	// Started is how long the call took, jar resolution included (and for
	// Restart, the stop).
	Started time.Duration
}

// ErrNotRunning is returned by Status and Down when no broker is recorded or
// the recorded one does not answer, and by Stop, Kill, Pause and Resume when
// no recorded broker process is alive.
var ErrNotRunning = errors.New("broker: not running")

// Status reports the recorded broker if it answers a round trip.
func (c *Config) Status(ctx context.Context) (Running, error) {
	addr, err := os.ReadFile(c.bootstrapFile())
	if err != nil {
		return Running{}, ErrNotRunning
	}
	bootstrap := strings.TrimSpace(string(addr))
	if err := Ping(ctx, bootstrap); err != nil {
		if pid, perr := c.brokerPID(); perr == nil && paused(pid) {
			err = fmt.Errorf("%v (pid %d is paused: Resume it)", err, pid)
		}
		return Running{}, fmt.Errorf("%w: recorded at %s but %v", ErrNotRunning, bootstrap, err)
	}
	pid, _ := readPID(c.pidFile())
	return Running{Bootstrap: bootstrap, PID: pid}, nil
}

// Up starts a fresh broker, or reuses the recorded one when it answers.
func (c *Config) Up(ctx context.Context, progress func(string)) (Running, error) {
	start := time.Now()
	if r, err := c.Status(ctx); err == nil {
		r.Reused = true
		r.Started = time.Since(start)
		return r, nil
	}
	// A recorded broker that does not answer may still be a live process
	// (hung, paused or half-started): stop it so ports and data are free.
	_ = c.Down(ctx)
	if err := c.prepare(ctx, progress); err != nil {
		return Running{}, err
	}
	if err := os.RemoveAll(c.dataDir()); err != nil {
		return Running{}, fmt.Errorf("broker: clear data dir: %w", err)
	}
	for _, d := range []string{c.dataDir(), c.logDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Running{}, fmt.Errorf("broker: %w", err)
		}
	}
	ports, err := freePorts(2 + len(c.Listeners))
	if err != nil {
		return Running{}, err
	}
	extra := extraListeners(c.Listeners, ports[2:])
	if err := os.WriteFile(c.propsFile(), []byte(serverProperties(ports[0], ports[1], c.dataDir(), extra...)+extraProperties(c.Properties)), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: %w", err)
	}
	if err := os.WriteFile(c.log4jFile(), []byte(log4j2Properties), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: %w", err)
	}
	progress("formatting KRaft storage")
	format := exec.CommandContext(ctx, c.Java, "-Xmx256m",
		"-Dlog4j2.configurationFile="+c.log4jFile(), "-cp", c.classpath(),
		"kafka.tools.StorageTool", "format", "-t", clusterID(), "-c", c.propsFile(), "-g")
	if out, err := format.CombinedOutput(); err != nil {
		return Running{}, fmt.Errorf("broker: storage format: %w\n%s", err, tail(string(out), 20))
	}
	r, err := c.launch(ctx, progress, fmt.Sprintf("127.0.0.1:%d", ports[0]), start, false)
	if err == nil && len(extra) > 0 {
		r.Listeners = map[string]string{}
		for _, l := range extra {
			r.Listeners[l.name] = fmt.Sprintf("127.0.0.1:%d", l.port)
		}
	}
	return r, err
}

// Down stops the recorded broker like Stop (SIGTERM, then SIGKILL after
// StopTimeout) and forgets it: the next Up formats a fresh one, and Start
// refuses. The data directory is left for inspection.
func (c *Config) Down(ctx context.Context) error {
	defer os.Remove(c.bootstrapFile())
	defer os.Remove(c.pidFile())
	if _, err := os.Stat(c.pidFile()); err != nil {
		return ErrNotRunning
	}
	if err := c.Stop(ctx); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return nil
}

// prepare checks for Java and makes sure LibDir holds the jars.
func (c *Config) prepare(ctx context.Context, progress func(string)) error {
	if _, err := exec.LookPath(c.Java); err != nil {
		return fmt.Errorf("broker: %q not found: install Java 17+ (e.g. apt-get install openjdk-17-jre-headless)", c.Java)
	}
	return c.ensureJars(ctx, progress)
}

// classpath is expanded by the JVM, not a shell.
func (c *Config) classpath() string { return filepath.Join(c.LibDir, "*") }

// launch starts the JVM on the formatted StateDir, records its pid, waits
// until a client round trip succeeds and then records bootstrap. A broker
// that does not become ready is killed, and the error carries the log tail.
// again appends to the log (Start) instead of truncating it (Up).
func (c *Config) launch(ctx context.Context, progress func(string), bootstrap string, since time.Time, again bool) (Running, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if again {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logf, err := os.OpenFile(c.LogFile(), flags, 0o644)
	if err != nil {
		return Running{}, fmt.Errorf("broker: log file: %w", err)
	}
	defer logf.Close()
	if again {
		fmt.Fprintf(logf, "[%s] tidemark: starting the broker again on its existing data and ports\n",
			time.Now().Format("2006-01-02 15:04:05,000"))
	}
	heap := fmt.Sprintf("%dm", c.HeapMB)
	// Not CommandContext: the broker must outlive this call.
	cmd := exec.Command(c.Java, "-Xms"+heap, "-Xmx"+heap, "-XX:+UseG1GC",
		"-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
		"-Dlog4j2.configurationFile="+c.log4jFile(), "-Dkafka.logs.dir="+c.logDir(),
		"-cp", c.classpath(), "kafka.Kafka", c.propsFile())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // own session: Ctrl-C on make does not kill it midway
	progress("starting broker on " + bootstrap)
	if err := cmd.Start(); err != nil {
		return Running{}, fmt.Errorf("broker: start java: %w", err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return Running{}, fmt.Errorf("broker: pid file: %w", err)
	}
	// This goroutine reaps the broker whenever it exits, for as long as the
	// calling process lives (brokerctl exits first, and init reaps).
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	gone := func() error {
		select {
		case err := <-exited:
			return fmt.Errorf("broker exited before it was ready: %v", err)
		default:
			return nil
		}
	}
	if err := waitReady(ctx, bootstrap, c.ReadyTimeout, gone); err != nil {
		_ = signalWait(pid, syscall.SIGKILL, goneTimeout)
		os.Remove(c.pidFile())
		return Running{}, fmt.Errorf("%w; broker log: %s\n%s", err, c.LogFile(), c.LogTail(30))
	}
	if err := os.WriteFile(c.bootstrapFile(), []byte(bootstrap+"\n"), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: bootstrap file: %w", err)
	}
	return Running{Bootstrap: bootstrap, PID: pid, Started: time.Since(since)}, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// clusterID returns a random cluster id the way Kafka's Uuid.randomUuid makes
// one: a version-4 UUID in unpadded base64url, drawn again when the text
// starts with '-', because the storage tool would parse such an id as an
// option (about one draw in 64).
func clusterID() string { return newClusterID(rand.Reader) }

func newClusterID(random io.Reader) string {
	for {
		var b [16]byte
		if _, err := io.ReadFull(random, b[:]); err != nil {
			panic(fmt.Sprintf("broker: no randomness for a cluster id: %v", err))
		}
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return tail(string(b), lines)
}
