package testbroker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFakeBrokerProcess is not a test: fakeBroker runs the test binary as a
// stand-in broker process that only sleeps, with the state dir's
// server.properties on its command line as the real broker has.
func TestFakeBrokerProcess(t *testing.T) {
	if os.Getenv("TIDEMARK_FAKE_BROKER") != "1" {
		t.Skip("helper process for the signal tests")
	}
	time.Sleep(time.Hour)
}

// fakeBroker records a stand-in broker process in a fresh state dir, as Up
// would after the broker got ready.
func fakeBroker(t *testing.T) (*Config, int) {
	t.Helper()
	c := &Config{StateDir: t.TempDir(), RepoRoot: t.TempDir(), LibDir: t.TempDir(), StopTimeout: 20 * time.Second}
	if err := c.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.propsFile(), []byte(serverProperties(19092, 19093, c.dataDir())), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakeBrokerProcess$", "--", c.propsFile())
	cmd.Env = append(os.Environ(), "TIDEMARK_FAKE_BROKER=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reap, as launch does
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	pid := cmd.Process.Pid
	for _, f := range []struct{ path, content string }{
		{c.pidFile(), strconv.Itoa(pid)},
		{c.bootstrapFile(), "127.0.0.1:19092\n"},
	} {
		if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c, pid
}

func TestPauseResumeStopAndKillSignalTheRecordedProcess(t *testing.T) {
	t.Run("pause stops the process and resume continues it", func(t *testing.T) {
		c, pid := fakeBroker(t)
		if err := c.Pause(); err != nil {
			t.Fatalf("pause: %v", err)
		}
		if !paused(pid) {
			t.Fatalf("pid %d not stopped after Pause (state %c)", pid, procState(pid))
		}
		if err := c.Resume(); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if paused(pid) || !alive(pid) {
			t.Fatalf("pid %d state %c after Resume, want running", pid, procState(pid))
		}
	})
	t.Run("stop ends a paused broker without waiting for StopTimeout, keeping the record", func(t *testing.T) {
		c, pid := fakeBroker(t)
		if err := c.Pause(); err != nil {
			t.Fatalf("pause: %v", err)
		}
		began := time.Now()
		if err := c.Stop(context.Background()); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("stop of a paused broker took %s: SIGTERM waited for SIGCONT", took)
		}
		assertStoppedKeepingRecord(t, c, pid)
	})
	t.Run("kill ends the broker and waits until it is gone, keeping the record", func(t *testing.T) {
		c, pid := fakeBroker(t)
		if err := c.Kill(); err != nil {
			t.Fatalf("kill: %v", err)
		}
		assertStoppedKeepingRecord(t, c, pid)
	})
}

func assertStoppedKeepingRecord(t *testing.T, c *Config, pid int) {
	t.Helper()
	if alive(pid) {
		t.Fatalf("pid %d still alive", pid)
	}
	if _, err := os.Stat(c.pidFile()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file of a gone broker kept (%v): a later Kill could signal whoever gets the pid", err)
	}
	for _, f := range []string{c.bootstrapFile(), c.propsFile()} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s gone after a stop that should keep the broker for Start: %v", filepath.Base(f), err)
		}
	}
	if err := c.Kill(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second kill = %v, want ErrNotRunning", err)
	}
}

func TestSignalsSpareAProcessThatIsNotTheBroker(t *testing.T) {
	c := &Config{StateDir: t.TempDir()}
	// A stale pid file whose pid now belongs to someone else: this test.
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"kill": c.Kill, "pause": c.Pause, "resume": c.Resume,
		"stop": func() error { return c.Stop(context.Background()) },
	} {
		if err := op(); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("%s with a pid file naming another process = %v, want ErrNotRunning", name, err)
		}
	}
}

func TestStartRefusesAStateDirWithoutABroker(t *testing.T) {
	formatted := func(c *Config) {
		if err := os.MkdirAll(c.dataDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{c.propsFile(), c.metaFile()} {
			if err := os.WriteFile(f, []byte(serverProperties(19092, 19093, c.dataDir())), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		setup func(*Config)
		want  string
	}{
		{"a state dir never formatted", func(*Config) {}, "start a fresh broker with Up"},
		{"properties written but the format never ran", func(c *Config) {
			_ = os.WriteFile(c.propsFile(), []byte(serverProperties(19092, 19093, c.dataDir())), 0o644)
		}, "no server.properties or formatted data/"},
		{"a broker that Down forgot", formatted, "Down forgot its broker"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{StateDir: t.TempDir(), RepoRoot: t.TempDir(), LibDir: t.TempDir(), Java: "no-such-java"}
			if err := c.EnsureDefaults(); err != nil {
				t.Fatal(err)
			}
			tc.setup(c)
			ctx := context.Background()
			for name, op := range map[string]func() error{
				"start":   func() error { _, err := c.Start(ctx, func(s string) { t.Log(s) }); return err },
				"restart": func() error { _, err := c.Restart(ctx, func(s string) { t.Log(s) }, true); return err },
			} {
				err := op()
				if !errors.Is(err, ErrNotFormatted) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s = %v, want ErrNotFormatted saying %q", name, err, tc.want)
				}
			}
		})
	}
}

func TestBootstrapFromProperties(t *testing.T) {
	got, err := bootstrapFromProperties(serverProperties(19092, 19093, "/data"))
	if err != nil || got != "127.0.0.1:19092" {
		t.Fatalf("bootstrap of our own server.properties = %q, %v; want 127.0.0.1:19092", got, err)
	}
	for _, bad := range []string{
		"listeners=PLAINTEXT://127.0.0.1:1\n",
		"advertised.listeners=SSL://127.0.0.1:1\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1\n",
	} {
		if got, err := bootstrapFromProperties(bad); err == nil {
			t.Fatalf("bootstrap of %q = %q, want an error", bad, got)
		}
	}
}

func TestServerPropertiesExtraListeners(t *testing.T) {
	extra := extraListeners(map[string]string{"SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}, []int{19094, 19095})
	props := serverProperties(19092, 19093, "/data", extra...)
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_PLAINTEXT://127.0.0.1:19094,SSL://127.0.0.1:19095\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19094,SSL://127.0.0.1:19095\n",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL\n",
		"inter.broker.listener.name=PLAINTEXT\n",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("server.properties lacks %q:\n%s", want, props)
		}
	}
	// A restart still finds the PLAINTEXT bootstrap among the listeners.
	if got, err := bootstrapFromProperties(props); err != nil || got != "127.0.0.1:19092" {
		t.Fatalf("bootstrap with extra listeners = %q, %v; want 127.0.0.1:19092", got, err)
	}
}
