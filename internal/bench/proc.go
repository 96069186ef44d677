package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc/<pid>/stat.
const clockTicks = 100

// ProcUsage is what /proc says of a process.
type ProcUsage struct {
	CPU     time.Duration // user + system
	PeakRSS int64         // bytes (VmHWM)
}

// readUsage reads CPU time and peak RSS of pid. It must be called before the
// process is reaped.
func readUsage(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("bench: usage of %d: %w", pid, err)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ProcUsage{}, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	// Fields after the command name start at field 3 (state); utime and
	// stime are fields 14 and 15.
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return ProcUsage{}, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	u := ProcUsage{CPU: time.Duration(ut+st) * time.Second / clockTicks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				u.PeakRSS = kb * 1024
			}
		}
	}
	return u, nil
}
