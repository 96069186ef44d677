package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// What the sweep measures, from outside the systems:
//
//   - staleness of count outputs: receive time at an external
//     read_committed consumer minus the produce time of the input that
//     made the count (the n-th input of the key for count n). Event times
//     are skewed, so the output's timestamp is not the origin: the driver
//     books every input's produce time per key (inputBook), and the
//     watcher looks the count up. A system that emits fewer updates (Kafka
//     Streams' record cache) is measured on those it emits, each for the
//     newest input it covers;
//   - window close→visible: from the moment the watermark passed the
//     window's end + grace (the produce time of the first input of the
//     window's partition stamped at or after end + grace: stream time is
//     per partition in both systems) to the final's receive time;
//   - goodput: count outputs received per second of a phase;
//   - commits/s and commit latency: the workers print
//     "COMMITS <total> <mean latency ms>" (sweepCommitsLine);
//   - CPU of the worker and of the broker process from /proc.

// sweepCommitsLine is the line prefix of a worker's commit report.
const sweepCommitsLine = "COMMITS"

func printCommits(total uint64, latency time.Duration) {
	fmt.Printf("%s %d %.3f\n", sweepCommitsLine, total, float64(latency.Microseconds())/1000)
}

// commitSample is one COMMITS line of one worker process.
type commitSample struct {
	at        time.Time
	total     float64
	latencyMs float64
}

// commitSamples parses a worker's COMMITS lines.
func (l *eventLog) commitSamples() []commitSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []commitSample
	for _, e := range l.ev {
		f := strings.Fields(e.line)
		if len(f) != 3 || f[0] != sweepCommitsLine {
			continue
		}
		n, err1 := strconv.ParseFloat(f[1], 64)
		lat, err2 := strconv.ParseFloat(f[2], 64)
		if err1 == nil && err2 == nil {
			out = append(out, commitSample{e.at, n, lat})
		}
	}
	return out
}

// commitsBetween sums, over the run's worker processes (one before the
// kill, one after), the commits each reported between from and to, and
// returns the median of the latencies they reported in between.
func commitsBetween(procs [][]commitSample, from, to time.Time) (commits float64, medianLatencyMs float64) {
	var lats []float64
	for _, ss := range procs {
		at := func(t time.Time) float64 { // the last total reported at or before t
			v := 0.0
			for _, s := range ss {
				if s.at.After(t) {
					break
				}
				v = s.total
			}
			return v
		}
		commits += at(to) - at(from)
		for _, s := range ss {
			if !s.at.Before(from) && s.at.Before(to) && s.latencyMs > 0 {
				lats = append(lats, s.latencyMs)
			}
		}
	}
	return commits, median(lats)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// inputBook is what the driver produced: per key the produce times of its
// inputs in order, per partition the steps of its maximum event time.
type inputBook struct {
	mu     sync.Mutex
	start  time.Time
	times  [][]int64 // per key index: produce time, ns since start
	partOf []int32   // per key index: its input partition
	maxTs  []int64   // per partition: highest event time produced, ms
	steps  [][]tsStep
	sent   int64
}

// tsStep: from at on, the partition's highest event time was ts (ms).
type tsStep struct {
	ts int64
	at int64 // ns since start
}

func newInputBook(start time.Time, keys [][]byte, partitions int32) *inputBook {
	b := &inputBook{start: start, times: make([][]int64, len(keys)), partOf: make([]int32, len(keys)),
		maxTs: make([]int64, partitions), steps: make([][]tsStep, partitions)}
	p := kgo.StickyKeyPartitioner(nil).ForTopic("")
	for i, k := range keys {
		b.partOf[i] = int32(p.Partition(&kgo.Record{Key: k}, int(partitions)))
	}
	return b
}

// add books one input of key k produced at now with event time ts. The
// caller holds mu.
func (b *inputBook) add(k int, now, ts time.Time) {
	at := now.Sub(b.start).Nanoseconds()
	b.times[k] = append(b.times[k], at)
	p := b.partOf[k]
	if ms := ts.UnixMilli(); ms > b.maxTs[p] {
		b.maxTs[p] = ms
		b.steps[p] = append(b.steps[p], tsStep{ms, at})
	}
	b.sent++
}

// produced is when the n-th input (1-based) of key k was produced. The
// caller holds mu.
func (b *inputBook) produced(k int, n int64) (time.Duration, bool) {
	if k < 0 || k >= len(b.times) || n < 1 || n > int64(len(b.times[k])) {
		return 0, false
	}
	return time.Duration(b.times[k][n-1]), true
}

// closedAt is when partition p's event time first reached ts (ms): the
// produce time of the first input stamped at or after it. The caller holds
// mu.
func (b *inputBook) closedAt(p int32, ts int64) (time.Duration, bool) {
	if p < 0 || int(p) >= len(b.steps) {
		return 0, false
	}
	s := b.steps[p]
	i := sort.Search(len(s), func(i int) bool { return s[i].ts >= ts })
	if i == len(s) {
		return 0, false
	}
	return time.Duration(s[i].at), true
}

// keyIndex parses "sku-000123" (and "sku-000123@<start>") into 123 and
// the window start, if any.
func keyIndex(key []byte) (k int, start int64, windowed bool, ok bool) {
	s, ok := strings.CutPrefix(string(key), "sku-")
	if !ok {
		return 0, 0, false, false
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		st, err := strconv.ParseInt(s[i+1:], 10, 64)
		if err != nil {
			return 0, 0, false, false
		}
		start, windowed, s = st, true, s[:i]
	}
	k, err := strconv.Atoi(s)
	return k, start, windowed, err == nil
}

// cpuSampler samples the CPU seconds of the current worker process and
// of the broker every period, cumulatively across worker restarts.
type cpuSampler struct {
	mu      sync.Mutex
	pid     int
	base    time.Duration // CPU of the worker processes before pid
	last    time.Duration // pid's last reading
	broker  int
	samples []cpuSample
}

type cpuSample struct {
	at          time.Time
	app, broker time.Duration
}

func (c *cpuSampler) sample() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid != 0 {
		if u, err := readUsage(c.pid); err == nil {
			c.last = u.CPU
		}
	}
	var br time.Duration
	if c.broker != 0 {
		if u, err := readUsage(c.broker); err == nil {
			br = u.CPU
		}
	}
	c.samples = append(c.samples, cpuSample{time.Now(), c.base + c.last, br})
}

// switchTo makes pid the worker after the previous one exited having used
// total CPU (its exact figure from wait, not the last sample's).
func (c *cpuSampler) switchTo(pid int, total time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base += max(total, c.last)
	c.last = 0
	c.pid = pid
}

func (c *cpuSampler) run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		c.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// between is the app's and the broker's CPU between the last samples at or
// before from and to.
func (c *cpuSampler) between(from, to time.Time) (app, broker time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := func(t time.Time) cpuSample {
		var v cpuSample
		for _, s := range c.samples {
			if s.at.After(t) {
				break
			}
			v = s
		}
		return v
	}
	a, b := at(from), at(to)
	return a2z(b.app - a.app), a2z(b.broker - a.broker)
}

func a2z(d time.Duration) time.Duration { return max(d, 0) }

// brokerPID finds the process listening on the bootstrap address's port
// (Linux /proc: the listening socket's inode, then the process holding it),
// or 0: the broker's CPU is then reported as n/a.
func brokerPID(bootstrap string) int {
	i := strings.LastIndexByte(bootstrap, ':')
	if i < 0 {
		return 0
	}
	port, err := strconv.Atoi(bootstrap[i+1:])
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			j := strings.LastIndexByte(fs[1], ':')
			if p, err := strconv.ParseInt(fs[1][j+1:], 16, 32); err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, dir := range procs {
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[l] {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
				return pid
			}
		}
	}
	return 0
}
