package broker

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

// Running describes a broker Up started or found.
type Running struct {
	Bootstrap string
	PID       int
	// Reused is true when Up found a broker that was already answering.
	Reused bool
	// Started is how long Up took, jar resolution included.
	Started time.Duration
}

// ErrNotRunning is returned by Status and Down when no broker is recorded or
// the recorded one does not answer.
var ErrNotRunning = errors.New("broker: not running")

// Status reports the recorded broker if it answers a round trip.
func (c *Config) Status(ctx context.Context) (Running, error) {
	addr, err := os.ReadFile(c.bootstrapFile())
	if err != nil {
		return Running{}, ErrNotRunning
	}
	bootstrap := strings.TrimSpace(string(addr))
	if err := Ping(ctx, bootstrap); err != nil {
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
	// (hung or half-started): stop it so ports and data are free.
	_ = c.Down(ctx)
	if _, err := exec.LookPath(c.Java); err != nil {
		return Running{}, fmt.Errorf("broker: %q not found: install Java 17+ (e.g. apt-get install openjdk-17-jre-headless)", c.Java)
	}
	if err := c.ensureJars(ctx, progress); err != nil {
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
	ports, err := freePorts(2)
	if err != nil {
		return Running{}, err
	}
	props := filepath.Join(c.StateDir, "server.properties")
	logCfg := filepath.Join(c.StateDir, "log4j2.properties")
	if err := os.WriteFile(props, []byte(serverProperties(ports[0], ports[1], c.dataDir())), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: %w", err)
	}
	if err := os.WriteFile(logCfg, []byte(log4j2Properties), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: %w", err)
	}
	classpath := filepath.Join(c.LibDir, "*") // expanded by the JVM, not a shell
	progress("formatting KRaft storage")
	format := exec.CommandContext(ctx, c.Java, "-Xmx256m",
		"-Dlog4j2.configurationFile="+logCfg, "-cp", classpath,
		"kafka.tools.StorageTool", "format", "-t", clusterID(), "-c", props, "-g")
	if out, err := format.CombinedOutput(); err != nil {
		return Running{}, fmt.Errorf("broker: storage format: %w\n%s", err, tail(string(out), 20))
	}

	logf, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return Running{}, fmt.Errorf("broker: log file: %w", err)
	}
	defer logf.Close()
	heap := fmt.Sprintf("%dm", c.HeapMB)
	// Not CommandContext: the broker must outlive this call.
	cmd := exec.Command(c.Java, "-Xms"+heap, "-Xmx"+heap, "-XX:+UseG1GC",
		"-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
		"-Dlog4j2.configurationFile="+logCfg, "-Dkafka.logs.dir="+c.logDir(),
		"-cp", classpath, "kafka.Kafka", props)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // own session: Ctrl-C on make does not kill it midway
	progress("starting broker on 127.0.0.1:" + strconv.Itoa(ports[0]))
	if err := cmd.Start(); err != nil {
		return Running{}, fmt.Errorf("broker: start java: %w", err)
	}
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return Running{}, fmt.Errorf("broker: pid file: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	bootstrap := fmt.Sprintf("127.0.0.1:%d", ports[0])
	if err := waitReady(ctx, bootstrap, c.ReadyTimeout, exited); err != nil {
		_ = c.Down(context.WithoutCancel(ctx))
		return Running{}, fmt.Errorf("%w; broker log: %s\n%s", err, c.LogFile(), tailFile(c.LogFile(), 30))
	}
	if err := os.WriteFile(c.bootstrapFile(), []byte(bootstrap+"\n"), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: bootstrap file: %w", err)
	}
	return Running{Bootstrap: bootstrap, PID: cmd.Process.Pid, Started: time.Since(start)}, nil
}

// Down stops the recorded broker: SIGTERM (a controlled shutdown), then
// SIGKILL after StopTimeout. The data directory is left for inspection; the
// next Up formats a fresh one.
func (c *Config) Down(ctx context.Context) error {
	defer os.Remove(c.bootstrapFile())
	pid, err := readPID(c.pidFile())
	if err != nil {
		return ErrNotRunning
	}
	defer os.Remove(c.pidFile())
	if !alive(pid) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("broker: SIGTERM %d: %w", pid, err)
	}
	deadline := time.Now().Add(c.StopTimeout)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			deadline = time.Now()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("broker: SIGKILL %d: %w", pid, err)
	}
	return nil
}

// alive reports whether pid is a running (not zombie) process. The broker is
// not our child after Up returns, so kill(0) plus /proc state is the check.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Field 3 is the state; it follows the ")" closing the command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
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
