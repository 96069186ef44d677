package testbroker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrNotFormatted is returned by Start and Restart when StateDir holds no
// broker to bring back: Up never formatted one there, or Down forgot it.
var ErrNotFormatted = errors.New("broker: no formatted broker recorded")

// Start starts the broker recorded in StateDir again, from its
// server.properties and data: no format, same ports, so clients keep their
// bootstrap address. It waits for the same readiness probe as Up. A broker
// that already answers is returned as it is (Reused); one whose process is
// alive but still starting is waited for; a paused one is an error (Resume
// it).
func (c *Config) Start(ctx context.Context, progress func(string)) (Running, error) {
	return c.start(ctx, progress, time.Now())
}

func (c *Config) start(ctx context.Context, progress func(string), since time.Time) (Running, error) {
	bootstrap, err := c.recordedBootstrap()
	if err != nil {
		return Running{}, err
	}
	if pid, err := c.brokerPID(); err == nil {
		if paused(pid) {
			return Running{}, fmt.Errorf("broker: pid %d at %s is paused: Resume it (or Restart it)", pid, bootstrap)
		}
		gone := func() error {
			if !alive(pid) {
				return fmt.Errorf("broker pid %d exited before it was ready", pid)
			}
			return nil
		}
		if err := waitReady(ctx, bootstrap, c.ReadyTimeout, gone); err != nil {
			return Running{}, fmt.Errorf("%w; broker log: %s\n%s", err, c.LogFile(), c.LogTail(30))
		}
		return Running{Bootstrap: bootstrap, PID: pid, Reused: true, Started: time.Since(since)}, nil
	}
	if err := c.prepare(ctx, progress); err != nil {
		return Running{}, err
	}
	if err := os.WriteFile(c.log4jFile(), []byte(log4j2Properties), 0o644); err != nil {
		return Running{}, fmt.Errorf("broker: %w", err)
	}
	return c.launch(ctx, progress, bootstrap, since, true)
}

// recordedBootstrap returns the client address of the broker that Up
// formatted in StateDir, read from its server.properties.
func (c *Config) recordedBootstrap() (string, error) {
	props, err := os.ReadFile(c.propsFile())
	if err == nil {
		_, err = os.Stat(c.metaFile())
	}
	if err != nil {
		return "", fmt.Errorf("%w in %s (no server.properties or formatted data/: %v): start a fresh broker with Up (`make kafka-up`)",
			ErrNotFormatted, c.StateDir, err)
	}
	if _, err := os.Stat(c.bootstrapFile()); err != nil {
		return "", fmt.Errorf("%w in %s: Down forgot its broker (or Up never got it ready): start a fresh broker with Up (`make kafka-up`)",
			ErrNotFormatted, c.StateDir)
	}
	bootstrap, err := bootstrapFromProperties(string(props))
	if err != nil {
		return "", fmt.Errorf("broker: %s: %w", c.propsFile(), err)
	}
	return bootstrap, nil
}

// Stop shuts the recorded broker down gracefully (SIGTERM, SIGKILL after
// StopTimeout) and waits until it is gone. Unlike Down it keeps the record:
// data, ports and bootstrap stay, and Start brings the same broker back.
func (c *Config) Stop(ctx context.Context) error {
	pid, err := c.brokerPID()
	if err != nil {
		return err
	}
	if err := terminate(ctx, pid, c.StopTimeout); err != nil {
		return err
	}
	os.Remove(c.pidFile())
	return nil
}

// Kill SIGKILLs the recorded broker, a crash without a controlled shutdown,
// and waits until the process is gone. Data, ports and bootstrap stay, so
// Start brings the same broker back (recovering its logs).
func (c *Config) Kill() error {
	pid, err := c.brokerPID()
	if err != nil {
		return err
	}
	if err := signalWait(pid, syscall.SIGKILL, goneTimeout); err != nil {
		return err
	}
	os.Remove(c.pidFile())
	return nil
}

// Restart stops the recorded broker (Stop, or Kill when hard) and starts it
// again on the same data and ports. A broker that is not running is just
// started.
func (c *Config) Restart(ctx context.Context, progress func(string), hard bool) (Running, error) {
	since := time.Now()
	// Refuse before stopping a broker that Start could not bring back.
	if _, err := c.recordedBootstrap(); err != nil {
		return Running{}, err
	}
	var err error
	if hard {
		progress("killing broker (SIGKILL)")
		err = c.Kill()
	} else {
		progress("stopping broker (SIGTERM)")
		err = c.Stop(ctx)
	}
	if err != nil && !errors.Is(err, ErrNotRunning) {
		return Running{}, err
	}
	return c.start(ctx, progress, since)
}

// Pause stops the recorded broker's process with SIGSTOP: a hung broker. Its
// ports still accept connections, but no request is answered until Resume.
// It returns once the process is stopped.
func (c *Config) Pause() error {
	pid, err := c.brokerPID()
	if err != nil {
		return err
	}
	return signalState(pid, syscall.SIGSTOP, true)
}

// Resume continues a broker that Pause stopped (SIGCONT). It returns once
// the process runs; the broker may need a moment to catch up on its timers.
func (c *Config) Resume() error {
	pid, err := c.brokerPID()
	if err != nil {
		return err
	}
	return signalState(pid, syscall.SIGCONT, false)
}
