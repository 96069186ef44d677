package frontier

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.trace expectations with the actual decisions")

// TestTraces replays testdata/*.trace: recorded or hand-written sequences of
// observations, each tick followed by "=>" and the decision it must produce.
// A mismatch prints the whole trace with the actual decisions, so a failure
// shows the full picture; -update rewrites the expectations.
//
// Each line is "+<duration> <op> [key=value ...]": advance the clock (with
// the last load's arrivals and processing continuing in the background, but
// no ticks), then apply op. Ops: new (options), load (drive steady load with auto-commits,
// like the runtime), arrive, process, output, watermark, start, ack, abort,
// settle (ack an outstanding commit), sync (commit and ack, to continue from
// a known point: a commit started the rig's latency, 10ms, ago), tick.
func TestTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.trace")
	if len(files) == 0 {
		t.Fatal("no traces in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := replay(t, string(raw))
			if got == string(raw) {
				return
			}
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s: decisions differ; actual trace:\n%s", file, got)
		})
	}
}

func replay(t *testing.T, trace string) string {
	var out strings.Builder
	var r *rig
	now := t0
	for n, line := range strings.Split(strings.TrimSuffix(trace, "\n"), "\n") {
		body, _, _ := strings.Cut(line, "=>")
		f := strings.Fields(body)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			out.WriteString(line + "\n")
			continue
		}
		fail := func(format string, a ...any) {
			t.Fatalf("line %d %q: %s", n+1, line, fmt.Sprintf(format, a...))
		}
		d, err := time.ParseDuration(strings.TrimPrefix(f[0], "+"))
		if err != nil || len(f) < 2 {
			fail("want +<duration> <op>")
		}
		kv := map[string]string{}
		for _, a := range f[2:] {
			k, v, _ := strings.Cut(a, "=")
			kv[k] = v
		}
		dur := func(k string) time.Duration {
			v, err := time.ParseDuration(kv[k])
			if err != nil {
				fail("%s: %v", k, err)
			}
			return v
		}
		num := func(k string) int {
			v, err := strconv.Atoi(kv[k])
			if err != nil {
				fail("%s: %v", k, err)
			}
			return v
		}
		if r != nil {
			r.background(d)
			now = r.now
		} else {
			now = now.Add(d)
		}
		result := ""
		switch f[1] {
		case "new":
			o := Options{Policy: Policy(kv["policy"])}
			if _, ok := kv["target"]; ok {
				o.StalenessTarget = dur("target")
			}
			if v, ok := kv["tenant"]; ok { // tenant=name:target
				name, tgt, _ := strings.Cut(v, ":")
				td, err := time.ParseDuration(tgt)
				if err != nil {
					fail("tenant: %v", err)
				}
				o.Tenants = map[string]TenantOptions{name: {StalenessTarget: td}}
			}
			r = newRig(t, o, testLat, testSvc)
			r.now = now
		case "load":
			rate, _ := strconv.ParseFloat(kv["rate"], 64)
			r.run(dur("for"), rate)
			r.bgRate = rate
		case "arrive":
			r.c.ObserveArrivals(now, num("n"))
		case "process":
			r.c.ObserveProcessed(now, num("n"), dur("busy"))
		case "output":
			r.c.ObserveOutput(now, kv["tenant"], now.Add(-dur("age")), num("n"))
		case "watermark":
			r.c.ObserveWatermark(now, now, num("closes"))
		case "start":
			r.c.ObserveCommitStarted(now)
		case "ack":
			r.c.ObserveCommitFinished(now, CommitAck{})
		case "abort":
			r.c.ObserveCommitAborted(now)
		case "settle":
			r.settle()
		case "sync":
			// Settle, then tick each millisecond until a commit is decided,
			// start it and ack it after the rig's latency: the trace
			// continues from a known point, just after a commit's ack.
			r.settle()
			r.c.ObserveProcessed(r.now, 1, r.svc)
			for i := 0; !r.tick().Commit; i++ {
				if i > 10000 {
					fail("no commit within 10s")
				}
				r.background(time.Millisecond)
			}
			r.background(r.lat)
			r.c.ObserveCommitFinished(r.now, CommitAck{})
			now = r.now
		case "tick":
			dec := r.c.Tick(now)
			result = fmt.Sprintf("commit=%v reason=%v", dec.Commit, dec.Reason)
			if dec.Overloaded {
				result += " overloaded"
			}
		default:
			fail("unknown op %q", f[1])
		}
		if result == "" {
			out.WriteString(line + "\n")
		} else {
			out.WriteString(strings.TrimRight(body, " ") + " => " + result + "\n")
		}
	}
	return out.String()
}
