package testbroker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// goneTimeout bounds the wait for a process to disappear after SIGKILL.
const goneTimeout = 10 * time.Second

// brokerPID returns the pid in the pid file if that process is alive and is
// this StateDir's broker, and ErrNotRunning otherwise. The identity check
// keeps a stale pid file, whose pid the kernel may have handed to another
// process since, from making Kill or Pause signal a stranger.
func (c *Config) brokerPID() (int, error) {
	pid, err := readPID(c.pidFile())
	if err != nil {
		return 0, fmt.Errorf("%w: no broker pid recorded in %s", ErrNotRunning, c.StateDir)
	}
	if !alive(pid) || !c.runs(pid) {
		return 0, fmt.Errorf("%w: broker pid %d recorded in %s is gone", ErrNotRunning, pid, c.StateDir)
	}
	return pid, nil
}

// runs reports whether pid's command line names this StateDir's
// server.properties. Without /proc it trusts the pid file.
func (c *Config) runs(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return true
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == c.propsFile() {
			return true
		}
	}
	return false
}

// alive reports whether pid is a running (not zombie) process. The broker is
// not our child once the call that started it returns, so kill(0) plus the
// /proc state is the check.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	return procState(pid) != 'Z'
}

// paused reports whether pid is stopped by a signal (SIGSTOP).
func paused(pid int) bool { return procState(pid) == 'T' }

// procState is the state letter of /proc/<pid>/stat (R, S, T, Z, ...), or 0
// when it cannot be read.
func procState(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Field 3 is the state; it follows the ")" closing the command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2]
	}
	return 0
}

// terminate asks pid to shut down (SIGTERM, and SIGCONT so that a paused
// broker can act on it), waits up to grace or until ctx is done, then
// SIGKILLs it. It returns once the process is gone.
func terminate(ctx context.Context, pid int, grace time.Duration) error {
	if err := sendSignal(pid, syscall.SIGTERM); err != nil {
		return err
	}
	if err := sendSignal(pid, syscall.SIGCONT); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
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
	return signalWait(pid, syscall.SIGKILL, goneTimeout)
}

// signalWait sends sig (SIGKILL) to pid and waits up to timeout until the
// process is gone.
func signalWait(pid int, sig syscall.Signal, timeout time.Duration) error {
	if err := sendSignal(pid, sig); err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); alive(pid); {
		if time.Now().After(deadline) {
			return fmt.Errorf("broker: pid %d still alive %s after %v", pid, timeout, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// signalState sends sig (SIGSTOP, SIGCONT) to pid and waits up to 30s until
// its paused state is want, so that the caller's next request meets a broker
// that is really hung (or really back). A stop takes effect once every
// thread leaves the kernel: on a machine loaded 12 times over its cores, a
// JVM thread in uninterruptible disk I/O held its broker running for more
// than 5s.
func signalState(pid int, sig syscall.Signal, want bool) error {
	if err := sendSignal(pid, sig); err != nil {
		return err
	}
	const wait = 30 * time.Second
	for deadline := time.Now().Add(wait); paused(pid) != want; {
		if !alive(pid) {
			return fmt.Errorf("%w: broker pid %d exited", ErrNotRunning, pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker: pid %d: paused=%t %s after %v", pid, paused(pid), wait, sig)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// sendSignal sends sig to pid; a process that is already gone is no error.
func sendSignal(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("broker: %v to pid %d: %w", sig, pid, err)
	}
	return nil
}
