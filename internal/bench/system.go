package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// System is one contender of the benchmark.
type System struct {
	// Name as it appears in results: "tidemark-adaptive", "kstreams-100ms".
	Name string
	// Kind selects how it runs: "kstreams", or a worker kind registered
	// with RegisterWorker ("raw", "raw-txn", "tidemark").
	Kind string
	// CommitInterval is passed to the system; 0 keeps its default.
	CommitInterval time.Duration
	// Policy is tidemark's commit policy: "adaptive" or "fixed".
	Policy string
	// NoCache turns Kafka Streams' record cache off, so it emits every
	// update like tidemark instead of one per key per commit.
	NoCache bool
	// Threads is tidemark's stream threads (processor.WithThreads); 0
	// keeps its default.
	Threads int
	// Pipelined is tidemark's pipelined commits: "on", "off", or "" for
	// the processor's default (pipeline.go).
	Pipelined string
	// RecordCache turns tidemark's record cache on for the count
	// (topology.WithRecordCache with this many keys per task), so it
	// emits one update per key per commit like Kafka Streams' default.
	RecordCache int
	// P99Tolerance is the adaptive policy's frontier.Options.P99Tolerance;
	// 0 keeps its default.
	P99Tolerance float64
}

// Job is what one system run processes; it is handed to workers as JSON.
type Job struct {
	Brokers        []string      `json:"brokers"`
	Workload       string        `json:"workload"`
	AppID          string        `json:"app_id"`
	Input          string        `json:"input"`
	Table          string        `json:"table,omitempty"`
	Output         string        `json:"output"`
	Partitions     int32         `json:"partitions"`
	StateDir       string        `json:"state_dir"`
	CommitInterval time.Duration `json:"commit_interval"`
	Policy         string        `json:"policy,omitempty"`
	Threads        int           `json:"threads,omitempty"`
	Pipelined      string        `json:"pipelined,omitempty"`
	RecordCache    int           `json:"record_cache,omitempty"`
	P99Tolerance   float64       `json:"p99_tolerance,omitempty"`
	WindowSize     time.Duration `json:"window_size"`
	Grace          time.Duration `json:"grace"`
	// WindowOutput is the sweep workload's second output, its window finals
	// (sweep.go); ReportCommits makes the worker print its commit count
	// that often (sweepCommitsLine).
	WindowOutput  string        `json:"window_output,omitempty"`
	ReportCommits time.Duration `json:"report_commits,omitempty"`
	// ReportTenants makes a tidemark worker print its tenants' at-commit p99
	// that often (tenants_atcommit.go).
	ReportTenants time.Duration `json:"report_tenants,omitempty"`
	// Isolation is the tenant burst measurement's setting (tenants.go).
	Isolation *TenantIsolation `json:"isolation,omitempty"`
	// MemberConfig is set by the failover measurement (failover.go), which
	// runs two members of one group; zero for the other measurements.
	MemberConfig
}

// WorkerFunc runs a system in worker mode until ctx is done. It calls ready
// once it owns its input partitions (and has restored its state), the moment
// throughput is timed from.
type WorkerFunc func(ctx context.Context, job Job, ready func()) error

var (
	workersMu sync.Mutex
	workers   = map[string]WorkerFunc{}
)

// RegisterWorker makes a worker kind available to the harness. The
// tidemark runtime registers "tidemark"; this package registers the raw
// systems.
func RegisterWorker(kind string, fn WorkerFunc) {
	workersMu.Lock()
	defer workersMu.Unlock()
	workers[kind] = fn
}

func worker(kind string) (WorkerFunc, bool) {
	workersMu.Lock()
	defer workersMu.Unlock()
	fn, ok := workers[kind]
	return fn, ok
}

const (
	envWorker = "TIDEMARK_BENCH_WORKER"
	envJob    = "TIDEMARK_BENCH_JOB"
	readyLine = "READY"
)

// MaybeRunWorker turns this process into a benchmark worker when the
// harness started it as one, and never returns then. Call it first thing in
// main (and in TestMain of packages whose tests run the harness).
func MaybeRunWorker() {
	kind := os.Getenv(envWorker)
	if kind == "" {
		return
	}
	os.Exit(runWorker(kind))
}

func runWorker(kind string) int {
	fn, ok := worker(kind)
	if !ok {
		fmt.Fprintf(os.Stderr, "bench worker: unknown kind %q\n", kind)
		return 2
	}
	var job Job
	if err := json.Unmarshal([]byte(os.Getenv(envJob)), &job); err != nil {
		fmt.Fprintf(os.Stderr, "bench worker: job: %v\n", err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	var once sync.Once
	ready := func() { once.Do(func() { fmt.Println(readyLine) }) }
	if err := fn(ctx, job, ready); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "bench worker %s: %v\n", kind, err)
		return 1
	}
	return 0
}

// process is a running system.
type process struct {
	cmd     *exec.Cmd
	ready   chan struct{}
	readyAt time.Time
	exited  chan error
	stderr  *tailBuffer
	// events are the worker's other stdout lines with their arrival
	// times (restore reports of the failover measurement).
	events eventLog
}

// Env says where the harness finds what systems need.
type Env struct {
	// Self is the executable re-run in worker mode. Default os.Executable.
	Self string
	// StreamsDir holds the built Kafka Streams peer (internal/bench/streams).
	StreamsDir string
	Java       string
}

// start launches the system and waits until it reports ready.
func (s System) start(ctx context.Context, env Env, job Job) (*process, error) {
	p, err := s.launch(env, job)
	if err != nil {
		return nil, err
	}
	if err := p.awaitReady(ctx, s.Name); err != nil {
		return nil, err
	}
	return p, nil
}

// launch starts the system's process without waiting for it: a caller that
// measures the process (its CPU) from its first instant takes the pid here.
func (s System) launch(env Env, job Job) (*process, error) {
	var cmd *exec.Cmd
	switch s.Kind {
	case "kstreams":
		args := []string{"-Xms512m", "-Xmx512m", "-cp",
			filepath.Join(env.StreamsDir, "target", "classes") + ":" + filepath.Join(env.StreamsDir, "target", "lib", "*"),
			"io.tidemark.bench.Main",
			"--bootstrap", strings.Join(job.Brokers, ","), "--app-id", job.AppID,
			"--workload", job.Workload, "--input", job.Input, "--output", job.Output,
			"--state-dir", job.StateDir,
			"--window-ms", fmt.Sprint(job.WindowSize.Milliseconds()), "--grace-ms", fmt.Sprint(job.Grace.Milliseconds())}
		if job.Table != "" {
			args = append(args, "--table", job.Table)
		}
		if job.WindowOutput != "" {
			args = append(args, "--window-output", job.WindowOutput)
		}
		if job.ReportCommits > 0 {
			args = append(args, "--report-commits-ms", fmt.Sprint(job.ReportCommits.Milliseconds()))
		}
		if s.CommitInterval > 0 {
			args = append(args, "--commit-interval-ms", fmt.Sprint(s.CommitInterval.Milliseconds()))
		}
		if s.NoCache {
			args = append(args, "--cache-bytes", "0")
		}
		args = append(args, job.MemberConfig.streamsArgs()...)
		cmd = exec.Command(env.Java, args...)
	default:
		if err := checkWorker(s.Name, s.Kind); err != nil {
			return nil, err
		}
		b, err := json.Marshal(job)
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(env.Self)
		cmd.Env = append(os.Environ(), envWorker+"="+s.Kind, envJob+"="+string(b))
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, ready: make(chan struct{}), exited: make(chan error, 1), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = p.stderr
	if os.Getenv("TIDEMARK_BENCH_LOG") != "" {
		cmd.Stderr = io.MultiWriter(p.stderr, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", s.Name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !signalled && line == readyLine {
				close(p.ready)
				signalled = true
			} else {
				p.events.add(line)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// awaitReady waits for the process's ready line; on failure the process
// is gone.
func (p *process) awaitReady(ctx context.Context, name string) error {
	select {
	case <-p.ready:
		p.readyAt = time.Now()
		return nil
	case err := <-p.exited:
		return fmt.Errorf("bench: %s exited before it was ready: %v\n%s", name, err, p.stderr)
	case <-time.After(90 * time.Second):
		p.kill()
		return fmt.Errorf("bench: %s not ready after 90s\n%s", name, p.stderr)
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
}

// exitedEarly reports a system that died while it was measured, with the
// end of its stderr.
func (p *process) exitedEarly() error {
	select {
	case err := <-p.exited:
		p.exited <- err // stop and kill wait on it too
		return fmt.Errorf("bench: system exited while measured: %v\n%s", err, p.stderr)
	default:
		return nil
	}
}

func (p *process) usage() ProcUsage {
	u, _ := readUsage(p.cmd.Process.Pid)
	return u
}

// stop sends SIGTERM and waits, SIGKILL after 30s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
