package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidemark-streams/tidemark/internal/netfault"
)

// ServiceConfig is what every instance of the service under test shares.
type ServiceConfig struct {
	Bin          string // the countsvc binary
	Brokers      []string
	App          string
	In, Out, DLQ string
	// Dir holds each instance's state directory and log file.
	Dir string
	// SessionTimeout of the consumer group; 0 leaves tidemark's default.
	SessionTimeout time.Duration
	// Guarantee is passed to --guarantee when set (at_least_once is the
	// campaign's negative control).
	Guarantee string
	// Threads is passed to --threads when set (stream threads per
	// instance).
	Threads int
	// RestoreModeMinOffsets is passed to --restore-mode-min-offsets when
	// set: the campaign's states are far below the default, and lowering
	// it sends the restores of wiped and moved tasks through the sorted
	// rebuild (changelog/rebuild.go).
	RestoreModeMinOffsets int64
	// Standbys is passed to --standbys when set (standby replicas per
	// stateful task).
	Standbys int
	// SnapshotStore is passed to --snapshot-store when set: one store URL
	// every instance shares.
	SnapshotStore string
	// ProbingInterval is passed to --probing-rebalance-interval when set,
	// so warm-ups finish and move their tasks within a scenario.
	ProbingInterval time.Duration
	// CheckpointMaxInterval is passed to --checkpoint-max-interval when
	// set: snapshots are written at checkpoints, which tidemark's default
	// policy spaces minutes apart, longer than a scenario.
	CheckpointMaxInterval time.Duration
	// Proxied gives every instance a netfault.Proxy of its own to the broker (one
	// broker only), so a scenario can partition it (Fleet.Partition).
	Proxied bool
}

// Fleet runs instances of the service as child processes and supervises
// them: an instance that exits without being told to is a crash, counted,
// reported with the tail of its log, and restarted after a second, as a
// process supervisor would.
type Fleet struct {
	cfg  ServiceConfig
	logf func(format string, args ...any)

	mu        sync.Mutex
	instances map[string]*Instance
	stopping  bool
	crashes   []string
	reasons   []string // per crash: the error the instance logged last
	kills     int
	terms     int
	freezes   int
	cuts      int
	unclean   []string
	wg        sync.WaitGroup
}

// Instance is one service process slot: an instance id, its state
// directory and log file, and the process currently running in it.
type Instance struct {
	ID       string
	StateDir string
	LogPath  string

	cmd      *exec.Cmd
	done     chan struct{}
	exitErr  error
	expected bool // the harness sent the signal it will exit from
	want     bool // the supervisor keeps it running
	starts   int
	logStart int64           // the log's size when the current process started
	proxy    *netfault.Proxy // with ServiceConfig.Proxied, kept across restarts
	// httpAddr is where the process of start number httpStart serves
	// HTTP (HTTPAddr).
	httpAddr  string
	httpStart int
}

func NewFleet(cfg ServiceConfig, logf func(string, ...any)) *Fleet {
	return &Fleet{cfg: cfg, logf: logf, instances: map[string]*Instance{}}
}

func (f *Fleet) instance(id string) *Instance {
	in := f.instances[id]
	if in == nil {
		in = &Instance{ID: id, StateDir: filepath.Join(f.cfg.Dir, id, "state"), LogPath: filepath.Join(f.cfg.Dir, id+".log")}
		f.instances[id] = in
	}
	return in
}

// Start starts instance id (creating the slot on first use).
func (f *Fleet) Start(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instance(id)
	in.want = true
	return f.startLocked(in)
}

func (f *Fleet) startLocked(in *Instance) error {
	if in.cmd != nil && !closed(in.done) {
		return fmt.Errorf("soak: instance %s already running (pid %d)", in.ID, in.cmd.Process.Pid)
	}
	if err := os.MkdirAll(in.StateDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(in.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	in.starts++
	if st, err := logf.Stat(); err == nil {
		in.logStart = st.Size()
	}
	fmt.Fprintf(logf, "=== soak: start #%d of %s at %s ===\n", in.starts, in.ID, time.Now().Format(time.RFC3339Nano))
	brokers := strings.Join(f.cfg.Brokers, ",")
	var proxyArgs []string
	if f.cfg.Proxied {
		if in.proxy == nil {
			if len(f.cfg.Brokers) != 1 {
				logf.Close()
				return fmt.Errorf("soak: a proxied fleet needs exactly one broker, got %v", f.cfg.Brokers)
			}
			p, err := netfault.New(f.cfg.Brokers[0])
			if err != nil {
				logf.Close()
				return fmt.Errorf("soak: proxy for %s: %w", in.ID, err)
			}
			in.proxy = p
		}
		brokers = in.proxy.Addr()
		proxyArgs = []string{"--broker-proxy", in.proxy.Addr()}
	}
	args := []string{
		"--brokers", brokers, "--app", f.cfg.App,
		"--in", f.cfg.In, "--out", f.cfg.Out, "--dlq", f.cfg.DLQ,
		"--state-dir", in.StateDir, "--instance-id", in.ID,
		// HTTP on a free port, as a deployed instance serves its metrics:
		// the instances' peer failure detectors then remove a SIGKILLed
		// instance from the group within a second, so the faults also
		// exercise those removals and the rebalances they start.
		"--http", "127.0.0.1:0",
	}
	args = append(args, proxyArgs...)
	if f.cfg.SessionTimeout > 0 {
		args = append(args, "--session-timeout", f.cfg.SessionTimeout.String())
	}
	if f.cfg.Guarantee != "" {
		args = append(args, "--guarantee", f.cfg.Guarantee)
	}
	if f.cfg.Threads > 0 {
		args = append(args, "--threads", strconv.Itoa(f.cfg.Threads))
	}
	if f.cfg.RestoreModeMinOffsets > 0 {
		args = append(args, "--restore-mode-min-offsets", strconv.FormatInt(f.cfg.RestoreModeMinOffsets, 10))
	}
	if f.cfg.Standbys > 0 {
		args = append(args, "--standbys", strconv.Itoa(f.cfg.Standbys))
	}
	if f.cfg.SnapshotStore != "" {
		args = append(args, "--snapshot-store", f.cfg.SnapshotStore)
	}
	if f.cfg.CheckpointMaxInterval > 0 {
		args = append(args, "--checkpoint-max-interval", f.cfg.CheckpointMaxInterval.String())
	}
	if f.cfg.ProbingInterval > 0 {
		args = append(args, "--probing-rebalance-interval", f.cfg.ProbingInterval.String())
	}
	cmd := exec.Command(f.cfg.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the harness; never outlive a crashed or interrupted run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("soak: start %s: %w", in.ID, err)
	}
	in.cmd, in.done, in.expected, in.exitErr = cmd, make(chan struct{}), false, nil
	done := in.done
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := cmd.Wait()
		logf.Close()
		f.mu.Lock()
		in.exitErr = err
		close(done)
		crashed := !in.expected
		restart := crashed && in.want && !f.stopping
		if crashed {
			reason := lastError(in.LogPath)
			if reason == "" {
				reason = fmt.Sprint(err)
			}
			msg := fmt.Sprintf("instance %s (pid %d, start #%d) exited by itself: %v; log %s", in.ID, cmd.Process.Pid, in.starts, err, in.LogPath)
			f.crashes = append(f.crashes, msg)
			f.reasons = append(f.reasons, reason)
			f.logf("CRASH %s\n%s", msg, indent(tailLines(in.LogPath, 8)))
		}
		f.mu.Unlock()
		if restart {
			time.Sleep(time.Second)
			f.mu.Lock()
			if in.want && !f.stopping && closed(in.done) {
				if err := f.startLocked(in); err != nil {
					f.logf("supervisor: restart %s: %v", in.ID, err)
				} else {
					f.logf("supervisor: restarted %s (pid %d)", in.ID, in.cmd.Process.Pid)
				}
			}
			f.mu.Unlock()
		}
	}()
	return nil
}

// Kill SIGKILLs instance id and waits for it; it stays down until Start.
func (f *Fleet) Kill(id string) error {
	f.mu.Lock()
	in := f.instances[id]
	if in == nil || in.cmd == nil || closed(in.done) {
		f.mu.Unlock()
		return fmt.Errorf("soak: kill %s: not running", id)
	}
	in.expected, in.want = true, false
	f.kills++
	_ = in.cmd.Process.Signal(syscall.SIGKILL)
	done := in.done
	f.mu.Unlock()
	<-done
	return nil
}

// Term asks instance id to stop (SIGTERM) and waits up to timeout; then it
// SIGKILLs it. A stop that needs the SIGKILL, or exits non-zero, is an
// unclean stop: reported, and a failure of the scenario.
func (f *Fleet) Term(id string, timeout time.Duration) error {
	f.mu.Lock()
	in := f.instances[id]
	if in == nil || in.cmd == nil || closed(in.done) {
		f.mu.Unlock()
		return fmt.Errorf("soak: stop %s: not running", id)
	}
	in.expected, in.want = true, false
	f.terms++
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	done, pid := in.done, in.cmd.Process.Pid
	f.mu.Unlock()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
		f.mu.Lock()
		msg := fmt.Sprintf("instance %s (pid %d) did not stop within %s of SIGTERM and was killed; log %s", id, pid, timeout, in.LogPath)
		f.unclean = append(f.unclean, msg)
		f.mu.Unlock()
		f.logf("UNCLEAN STOP %s", msg)
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.exitErr != nil {
		msg := fmt.Sprintf("instance %s (pid %d) exited with %v after SIGTERM (%s); log %s", id, pid, in.exitErr, time.Since(start).Round(time.Millisecond), in.LogPath)
		f.unclean = append(f.unclean, msg)
		f.logf("UNCLEAN STOP %s\n%s", msg, indent(tailLines(in.LogPath, 8)))
	}
	return nil
}

// Suspend stops instance id (SIGSTOP), as a long GC pause, a VM stall or
// a hung disk would: the process keeps its sockets and its open
// transaction and answers nothing. Past the session timeout its group
// moves its partitions to the others and a new owner ends its
// transaction, so after Resume it comes back as a zombie. Kill ends a
// suspended instance as it ends a running one.
func (f *Fleet) Suspend(id string) error {
	return f.signal(id, "suspend", syscall.SIGSTOP, &f.freezes)
}

// Cut partitions instance id from the broker (its proxy drops every
// packet) while it keeps running and serving HTTP. The fleet must be
// Proxied.
func (f *Fleet) Cut(id string) error {
	return f.withProxy(id, "cut", func(p *netfault.Proxy) { p.Cut(); f.cuts++ })
}

// Heal ends instance id's partition.
func (f *Fleet) Heal(id string) error { return f.withProxy(id, "heal", (*netfault.Proxy).Heal) }

// withProxy calls fn with instance id's proxy, f.mu held.
func (f *Fleet) withProxy(id, what string, fn func(*netfault.Proxy)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[id]
	if in == nil || in.proxy == nil {
		return fmt.Errorf("soak: %s %s: no proxy (ServiceConfig.Proxied)", what, id)
	}
	fn(in.proxy)
	return nil
}

// closeProxies closes the instances' proxies once no process needs them.
func (f *Fleet) closeProxies() {
	f.mu.Lock()
	var ps []*netfault.Proxy
	for _, in := range f.instances {
		if in.proxy != nil {
			ps = append(ps, in.proxy)
			in.proxy = nil
		}
	}
	f.mu.Unlock()
	for _, p := range ps {
		_ = p.Close()
	}
}

// Resume continues a suspended instance (SIGCONT).
func (f *Fleet) Resume(id string) error { return f.signal(id, "resume", syscall.SIGCONT, nil) }

// signal sends sig to instance id's process and counts it in n.
func (f *Fleet) signal(id, what string, sig syscall.Signal, n *int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[id]
	if in == nil || in.cmd == nil || closed(in.done) {
		return fmt.Errorf("soak: %s %s: not running", what, id)
	}
	if err := in.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("soak: %s %s: %w", what, id, err)
	}
	if n != nil {
		*n++
	}
	return nil
}

// Wipe deletes instance id's state directory; it must not be running.
func (f *Fleet) Wipe(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instance(id)
	if in.cmd != nil && !closed(in.done) {
		return fmt.Errorf("soak: wipe %s: still running", id)
	}
	return os.RemoveAll(in.StateDir)
}

// RemoveState deletes instance id's state directory while it runs, as an
// operator's rm -rf would.
func (f *Fleet) RemoveState(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return os.RemoveAll(f.instance(id).StateDir)
}

// HTTPAddr returns the address instance id's current process serves HTTP
// on (the service listens on port 0 and logs the port it got), or "" while
// it is not running or has not logged it yet.
func (f *Fleet) HTTPAddr(id string) string {
	f.mu.Lock()
	in := f.instances[id]
	if in == nil || in.cmd == nil || closed(in.done) {
		f.mu.Unlock()
		return ""
	}
	if in.httpStart == in.starts {
		defer f.mu.Unlock()
		return in.httpAddr
	}
	path, from, start := in.LogPath, in.logStart, in.starts
	f.mu.Unlock()
	addr := findHTTPAddr(path, from)
	if addr != "" {
		f.mu.Lock()
		if in.starts == start {
			in.httpAddr, in.httpStart = addr, start
		}
		f.mu.Unlock()
	}
	return addr
}

// httpLog is the line in which the service names its HTTP address.
const httpLog = `msg="serving HTTP"`

// findHTTPAddr reads the addr attribute of the first httpLog line of the
// log at path from byte from.
func findHTTPAddr(path string, from int64) string {
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	if _, err := fh.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, httpLog) {
			continue
		}
		if _, rest, ok := strings.Cut(line, " addr="); ok {
			addr, _, _ := strings.Cut(rest, " ")
			return addr
		}
	}
	return ""
}

// Running lists the instances running now, sorted.
func (f *Fleet) Running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, in := range f.instances {
		if in.cmd != nil && !closed(in.done) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Stopped lists the instance slots that exist and are not running.
func (f *Fleet) Stopped() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, in := range f.instances {
		if in.cmd == nil || closed(in.done) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// StopAll stops every running instance gracefully, in parallel, and ends
// supervision.
func (f *Fleet) StopAll(timeout time.Duration) {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range f.Running() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = f.Term(id, timeout)
		}()
	}
	wg.Wait()
	f.wg.Wait()
	f.closeProxies()
}

// KillAll SIGKILLs whatever still runs (cleanup after an aborted run).
func (f *Fleet) KillAll() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	for _, id := range f.Running() {
		_ = f.Kill(id)
	}
	f.wg.Wait()
	f.closeProxies()
}

// FleetStats is what the fleet saw.
type FleetStats struct {
	Kills, Terms, Starts int
	// Freezes counts the SIGSTOPs (Suspend), Cuts the partitions from
	// the broker (Cut).
	Freezes, Cuts    int
	Crashes, Unclean []string
	// CrashReasons counts crashes by the error the instance logged last
	// (its first line; crashes whose errors differ only in numbers count
	// under the first one's text).
	CrashReasons map[string]int
	// SortedRestores counts the restores the instances wrote as sorted
	// rebuilds (their "task DB written sorted" log lines), so a campaign
	// shows that the faults exercised that path too.
	SortedRestores int
	// SnapshotLoads counts the tasks the instances loaded from a snapshot
	// (their "task state … phase=snapshot … snapshot_duration=" lines);
	// StandbyStarts the rounds of standbys and warm-ups they started.
	SnapshotLoads, StandbyStarts int
	// MovedAside counts the damaged task DBs and state directories the
	// instances moved aside to rebuild (their "moving it aside" lines).
	MovedAside int
	Logs       []string
}

func (f *Fleet) Stats() FleetStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FleetStats{Kills: f.kills, Terms: f.terms, Freezes: f.freezes, Cuts: f.cuts, Crashes: append([]string(nil), f.crashes...), Unclean: append([]string(nil), f.unclean...),
		CrashReasons: map[string]int{}}
	// Group by the first line with its numbers blanked (partitions,
	// offsets, ports differ from crash to crash); keep one real example.
	examples := map[string]string{}
	for _, r := range f.reasons {
		first, _, _ := strings.Cut(r, "\n")
		key := digits.ReplaceAllString(first, "N")
		if _, ok := examples[key]; !ok {
			examples[key] = first
		}
		s.CrashReasons[examples[key]]++
	}
	for _, in := range f.instances {
		s.Starts += in.starts
		s.Logs = append(s.Logs, in.LogPath)
		s.SortedRestores += countLines(in.LogPath, sortedRestoreLog)
		s.SnapshotLoads += countLines(in.LogPath, snapshotLoadLog)
		s.StandbyStarts += countLines(in.LogPath, standbyStartLog)
		s.MovedAside += countLines(in.LogPath, damageLog)
	}
	sort.Strings(s.Logs)
	return s
}

func closed(c chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tailLines returns the last n lines of a file.
func tailLines(path string, n int) string {
	var lines []string
	eachLine(path, func(line string) {
		lines = append(lines, line)
		if len(lines) > n {
			lines = lines[1:]
		}
	})
	return strings.Join(lines, "\n")
}

// lastError returns the error of the last ERROR line in the tail of a
// service log: the err attribute if it has one, else the message.
func lastError(path string) string {
	lines := strings.Split(tailLines(path, 30), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !strings.Contains(line, "level=ERROR") {
			continue
		}
		if j := strings.Index(line, " err="); j >= 0 {
			v := line[j+5:]
			if uq, err := strconv.QuotedPrefix(v); err == nil {
				if s, err := strconv.Unquote(uq); err == nil {
					return s
				}
			}
			if k := strings.IndexByte(v, ' '); k >= 0 {
				v = v[:k]
			}
			return v
		}
		return line
	}
	return ""
}

// sortedRestoreLog is what changelog logs when it wrote a task DB as a
// sorted rebuild (changelog/rebuild.go).
const sortedRestoreLog = "task DB written sorted"

// snapshotLoadLog is in the "task state" line a task logs after it loaded
// a snapshot (processor/app_snapshot.go); standbyStartLog is what a
// session logs when it started standbys or warm-ups (processor/standby.go).
const (
	snapshotLoadLog = "snapshot_duration="
	standbyStartLog = "standby tasks started"
)

// countLines counts the lines of path that contain word.
func countLines(path, word string) int {
	n := 0
	eachLine(path, func(line string) {
		if strings.Contains(line, word) {
			n++
		}
	})
	return n
}

// eachLine calls fn with every line of path (nothing if it cannot be
// read).
func eachLine(path string, fn func(string)) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
}

// grepLines returns up to n lines of path that contain any of words,
// the last ones if there are more.
func grepLines(path string, n int, words ...string) []string {
	var out []string
	eachLine(path, func(line string) {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	})
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

var digits = regexp.MustCompile(`[0-9]+`)

var errStopped = errors.New("soak: scenario stopped")

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errStopped
	case <-t.C:
		return nil
	}
}
