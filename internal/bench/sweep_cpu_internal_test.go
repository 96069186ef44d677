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
	time.Sleep(400 * time.Millisecond) // no sample while a spins
	_ = a.Process.Kill()
	_ = a.Wait()
	used := a.ProcessState.UserTime() + a.ProcessState.SystemTime()
	if used < 50*time.Millisecond {
		t.Fatalf("the busy child used %v of CPU in 400 ms: the machine is too loaded to tell", used)
	}

	b := busy()
	defer func() { _ = b.Process.Kill(); _ = b.Wait() }()
	c.switchTo(b.Process.Pid, used)
	c.sample()
	app, _ := c.between(from, time.Now())
	if app < used {
		t.Fatalf("CPU across the kill %v, want at least the killed worker's %v", app, used)
	}
}
