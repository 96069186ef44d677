package bench

import (
	"os/exec"
	"testing"
	"time"
)

// A worker killed between two samples still counts all its CPU: the sweep
// SIGKILLs the worker, and its last busy stretch belongs to the kill phase.
func TestCPUSamplerCountsAKilledWorkerInFull(t *testing.T) {
	busy := func() *exec.Cmd {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := busy()
	c := &cpuSampler{pid: a.Process.Pid}
	c.sample()
	from := time.Now()
	first := c.samples[0].app
	// No sample while a spins, until it has used a measurable amount.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		u, err := readUsage(a.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if u.CPU >= first+100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy child used %v of CPU in 30 s", u.CPU)
		}
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	used := a.ProcessState.UserTime() + a.ProcessState.SystemTime()

	b := busy()
	defer func() { _ = b.Process.Kill(); _ = b.Wait() }()
	c.switchTo(b.Process.Pid, used)
	c.sample()
	app, _ := c.between(from, time.Now())
	if app < used-first {
		t.Fatalf("CPU across the kill %v, want at least the killed worker's %v since the first sample", app, used-first)
	}
}
