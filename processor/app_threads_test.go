package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// threadsView is GET /tasks with stream threads.
type threadsView struct {
	Active  []string            `json:"active"`
	Threads map[string][]string `json:"threads"`
	Standby []struct {
		Task string `json:"task"`
	} `json:"standby"`
}

// waitThreadsRunning waits until /tasks shows every thread of the App at
// base running at least one task and the App ready.
func waitThreadsRunning(t *testing.T, app *processor.App, base string, threads int) threadsView {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var v threadsView
	for time.Now().Before(deadline) {
		v = threadsView{}
		getJSON(t, base+"/tasks", &v)
		busy := 0
		for _, ids := range v.Threads {
			if len(ids) > 0 {
				busy++
			}
		}
		if busy == threads && app.Ready() {
			return v
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("threads never all ran tasks: %+v", v)
	return v
}

// TestThreadsCountExactlyOnceAcrossRestart runs a stateful pipeline (a
// count per key over 4 partitions) in an App with two stream threads:
// every key's counts are exactly 1..n (checkCounts, the reference), both
// threads run tasks, queries answer for keys of every thread's tasks, and
// /frontier and /metrics show the threads. The App then stops and a new
// one with the same application id and a fresh state directory (so every
// task restores from its changelog) takes the second half of the input:
// counts continue, exactly once.
func TestThreadsCountExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "threads")
	topo := countTopology(t, appID, in, out)
	const keys = 24

	want := produceKeysN(t, in, 0, 1200, keys, 4)
	app, stop := runApp(t, topo, processor.WithThreads(2), processor.WithHTTP("127.0.0.1:0"))
	checkCounts(t, out, want)
	base := "http://" + app.HTTPAddr()
	tasks := waitThreadsRunning(t, app, base, 2)
	t.Logf("tasks by thread: %v", tasks.Threads)
	seen := map[string]string{}
	for th, ids := range tasks.Threads {
		for _, id := range ids {
			if other, dup := seen[id]; dup {
				t.Fatalf("task %s on threads %s and %s", id, other, th)
			}
			seen[id] = th
		}
	}
	if len(seen) != 4 {
		t.Fatalf("%d tasks over the threads, want 4: %v", len(seen), tasks.Threads)
	}

	// Queries answer for every key, whichever thread runs its task.
	for k := range keys {
		key := fmt.Sprintf("sku-%02d", k)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := app.Get(ctx, "counts", []byte(key))
		cancel()
		if err != nil {
			t.Fatalf("query %s: %v", key, err)
		}
		if !res.Found || len(res.Entries) != 1 || len(res.Entries[0].Value) < 8 {
			t.Fatalf("query %s: %+v", key, res)
		}
		v := res.Entries[0].Value
		if got := int(binary.BigEndian.Uint64(v[len(v)-8:])); got != want[key] {
			t.Fatalf("query %s (partition %d, thread %s): count %d, want %d", key, res.Partition,
				seen[fmt.Sprintf("0_%d", res.Partition)], got, want[key])
		}
	}

	// /frontier: one record per thread, each thread's controller.
	var fr struct {
		Sinks map[string]struct {
			Partitions []struct {
				Offset int64 `json:"offset"`
			} `json:"partitions"`
			Publishers []string `json:"publishers"`
		} `json:"sinks"`
		Threads []struct {
			Thread     int    `json:"thread"`
			Instance   string `json:"instance"`
			Tasks      int    `json:"tasks"`
			Controller struct {
				Commits uint64 `json:"commits"`
			} `json:"controller"`
		} `json:"threads"`
	}
	getJSON(t, base+"/frontier", &fr)
	if len(fr.Threads) != 2 || fr.Threads[0].Controller.Commits == 0 || fr.Threads[1].Controller.Commits == 0 {
		t.Fatalf("/frontier threads: %+v", fr.Threads)
	}
	if !strings.HasSuffix(fr.Threads[1].Instance, "-t1") {
		t.Fatalf("thread 1's instance id %q", fr.Threads[1].Instance)
	}
	// Offsets count transaction markers too: each partition's is at
	// least its outputs.
	var committed int64
	for _, p := range fr.Sinks[out].Partitions {
		if p.Offset <= 0 {
			t.Fatalf("frontier of %s: a partition without outputs: %+v", out, fr.Sinks[out])
		}
		committed += p.Offset
	}
	if committed < 1200 || len(fr.Sinks[out].Publishers) != 2 {
		t.Fatalf("frontier of %s: %d offsets (want at least 1200), publishers %v", out, committed, fr.Sinks[out].Publishers)
	}
	// The dashboard's data endpoints answer for the whole App.
	for _, path := range []string{"/ui/api/frontier", "/ui/api/series"} {
		var v map[string]any
		getJSON(t, base+path, &v)
	}
	metrics := getText(t, base+"/metrics")
	for _, series := range []string{`tidemark_thread_commits_total{app="` + appID + `",thread="0"}`, `tidemark_thread_commits_total{app="` + appID + `",thread="1"}`,
		`tidemark_thread_tasks{app="` + appID + `",thread="1"}`} {
		if !strings.Contains(metrics, series) {
			t.Fatalf("/metrics lacks %s", series)
		}
	}
	stop()

	// A new process, a fresh state directory: state comes from the
	// changelogs.
	more := produceKeysN(t, in, 1200, 1200, keys, 4)
	for k, n := range more {
		want[k] += n
	}
	runApp(t, topo, processor.WithThreads(2))
	checkCounts(t, out, want)
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestThreadsCopartitionedJoin joins two tables over 4 co-partitioned
// partitions in an App with two threads, across a restart on a fresh state
// directory: partition p of both inputs must be on one thread (one task),
// or a side goes missing. Each key's last output must be its latest left
// value joined with its latest right value (the reference), with the
// updates randomised (logged seed) and interleaved between the two sides.
func TestThreadsCopartitionedJoin(t *testing.T) {
	t.Parallel()
	left := kafkatestNewTopic(t, 4)
	right := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "threads-join")
	b := topology.NewBuilder(appID)
	lt := b.Table(left, serde.String(), serde.String(), topology.Named("left"))
	rt := b.Table(right, serde.String(), serde.String(), topology.Named("right"))
	lt.Join(rt, func(_ string, l, r string) string { return l + "|" + r }, topology.Named("joined")).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	latestL, latestR := map[string]string{}, map[string]string{}
	feed := func(n int) {
		var recs []*kgo.Record
		for i := range n {
			k := fmt.Sprintf("k%02d", rng.IntN(20))
			p := processor.DefaultPartition([]byte(k), 4)
			if rng.IntN(2) == 0 {
				v := fmt.Sprintf("l%d", i)
				latestL[k] = v
				recs = append(recs, &kgo.Record{Topic: left, Key: []byte(k), Value: []byte(v), Partition: p})
			} else {
				v := fmt.Sprintf("r%d", i)
				latestR[k] = v
				recs = append(recs, &kgo.Record{Topic: right, Key: []byte(k), Value: []byte(v), Partition: p})
			}
		}
		kafkatest.Produce(t, recs...)
	}
	expected := func() map[string]string {
		want := map[string]string{}
		for k, l := range latestL {
			if r, ok := latestR[k]; ok {
				want[k] = l + "|" + r
			}
		}
		return want
	}
	check := func() {
		t.Helper()
		want := expected()
		var last map[string]string
		kafkatest.ConsumeUntil(t, out, time.Minute, func(recs []*kgo.Record) bool {
			last = map[string]string{}
			for _, r := range recs {
				last[string(r.Key)] = string(r.Value)
			}
			for k, v := range want {
				if last[k] != v {
					return false
				}
			}
			return true
		})
		for k, v := range want {
			if last[k] != v {
				t.Fatalf("key %s: last join output %q, want %q", k, last[k], v)
			}
		}
	}
	feed(400)
	_, stop := runApp(t, topo, processor.WithThreads(2))
	check()
	stop()
	feed(400)
	runApp(t, topo, processor.WithThreads(2))
	check()
}

// TestThreadsRebalanceBetweenTwoProcesses runs two Apps of one application
// in this process, two threads each (four group members), with a standby
// replica: partitions spread over the members as input keeps arriving, and
// when the first App stops its partitions move to the second (from its
// standbys), exactly once. Standbys are never on the process running the
// task (a sibling thread shares its state directory).
func TestThreadsRebalanceBetweenTwoProcesses(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "threads-rebalance")
	topo := countTopology(t, appID, in, out)
	want := map[string]int{}
	produced := 0
	feed := func(n int) {
		for k, c := range produceKeysN(t, in, produced, n, 24, 4) {
			want[k] += c
		}
		produced += n
	}
	opts := []processor.Option{processor.WithThreads(2), processor.WithStandbyReplicas(1), processor.WithHTTP("127.0.0.1:0"),
		func(c *processor.Config) { c.SessionTimeout = 6 * time.Second }}
	a, stopA := runApp(t, topo, append(opts, processor.WithInstanceID("a"))...)
	feed(600)
	checkCounts(t, out, want)
	b, _ := runApp(t, topo, append(opts, processor.WithInstanceID("b"))...)
	feed(600)
	// Both processes run tasks; a standby never sits on the process that
	// runs its task.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if a.HTTPAddr() == "" || b.HTTPAddr() == "" {
			// b's Run may still be setting up: no HTTP address yet.
			if time.Now().After(deadline) {
				t.Fatal("an App never served HTTP")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var va, vb threadsView
		getJSON(t, "http://"+a.HTTPAddr()+"/tasks", &va)
		getJSON(t, "http://"+b.HTTPAddr()+"/tasks", &vb)
		for _, v := range []threadsView{va, vb} {
			for _, s := range v.Standby {
				for _, id := range v.Active {
					if id == s.Task {
						t.Fatalf("task %s is active and standby on one process: %+v", id, v)
					}
				}
			}
		}
		if len(va.Active) > 0 && len(vb.Active) > 0 && len(va.Active)+len(vb.Active) == 4 && len(va.Standby)+len(vb.Standby) == 4 {
			t.Logf("a: %v standby %v; b: %v standby %v", va.Threads, va.Standby, vb.Threads, vb.Standby)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks never spread with standbys: a %+v, b %+v", va, vb)
		}
		time.Sleep(300 * time.Millisecond)
	}
	checkCounts(t, out, want)
	stopA() // a leaves: its partitions move to b's threads
	feed(600)
	checkCounts(t, out, want)
}

// TestThreadsErrorStopsAppNamingThread: a record that fails processing
// under the default fail policy ends the App, whichever thread runs its
// task, and Run's error names the thread; the other thread stops too.
func TestThreadsErrorStopsAppNamingThread(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "threads-fail")
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String()).
		MapValues(func(_ string, v string) string {
			if v == "boom" {
				panic("boom")
			}
			return v
		}).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()), processor.WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("ok"), Partition: 0},
		&kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("boom"), Partition: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run did not stop on the failing record within 60s")
	}
	if err == nil || !strings.Contains(err.Error(), "thread ") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Run: %v; want the failure naming its thread", err)
	}
	t.Logf("Run: %.200s", err)
}

// TestThreadsPinHotPartitions: with pinned partitions (as tenant placement
// dedicates them to hot tenants) and two threads, the pinned partition's
// task runs alone on thread 0 and the other tasks on thread 1; counts stay
// exactly once.
func TestThreadsPinHotPartitions(t *testing.T) {
	t.Parallel()
	in := kafkatestNewTopic(t, 4)
	out := kafkatestNewTopic(t, 4)
	appID := kafkatestName(t, "threads-pin")
	topo := countTopology(t, appID, in, out)
	want := produceKeysN(t, in, 0, 800, 24, 4)
	app, _ := runApp(t, topo, processor.WithThreads(2), processor.WithPinnedPartitions(3), processor.WithHTTP("127.0.0.1:0"))
	checkCounts(t, out, want)
	v := waitThreadsRunning(t, app, "http://"+app.HTTPAddr(), 2)
	if got := strings.Join(v.Threads["0"], ","); got != "0_3" {
		t.Fatalf("thread 0 runs %q, want the pinned task 0_3 alone (threads %v)", got, v.Threads)
	}
	if len(v.Threads["1"]) != 3 {
		t.Fatalf("thread 1 runs %v, want the 3 other tasks", v.Threads["1"])
	}
}
