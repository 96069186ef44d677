package integration_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// TestExactlyOnceAcrossBrokerOutageLongerThanTimeouts SIGKILLs the broker
// while a transaction is open (its records produced, EndTxn not yet sent),
// keeps it down for longer than both the group's SessionTimeout and the
// TransactionTimeout, and brings it back on its data and ports. The App
// must ride through without Run returning, answer queries meanwhile,
// resume by itself, and commit every count per key exactly once, in order;
// the outage shows in tidemark_session_restarts_total.
func TestExactlyOnceAcrossBrokerOutageLongerThanTimeouts(t *testing.T) {
	const (
		sessionTimeout = 3 * time.Second
		txnTimeout     = 6 * time.Second
		outage         = 10 * time.Second // > both
		in, out        = "outage-in", "outage-out"
		parts          = 2
		keys           = 8
	)
	b := kafkatest.PrivateBrokerWith(t, map[string]string{
		"group.min.session.timeout.ms": "1000",
		// The broker looks for transactions past their timeout every 10s
		// by default; look often, so the open one is aborted soon after
		// the broker is back.
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{in, out} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	want := map[string]int64{}
	produced := 0
	feed := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, n)
		for i := produced; i < produced+n; i++ {
			k := fmt.Sprintf("sku-%02d", i%keys)
			want[k]++
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
				Partition: processor.DefaultPartition([]byte(k), parts)})
		}
		produced += n
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}

	bld := topology.NewBuilder("outage")
	// Through a repartition topic: two sub-topologies, each with its
	// transaction's records in flight when the broker goes away.
	bld.Stream(in, serde.String(), serde.String()).
		GroupBy(func(k, _ string) string { return k }, serde.String(), topology.Named("bykey")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	// The hook holds a commit at BeforeEnd, when armed, until the test
	// has taken the broker away: the transaction is open with records.
	var armed atomic.Bool
	atEnd := make(chan chan struct{})
	logs := &testlog.Buffer{}
	app, err := processor.NewApp(topo,
		processor.WithConfig(processor.Config{SessionTimeout: sessionTimeout, TransactionTimeout: txnTimeout}),
		processor.WithBrokers(b.Bootstrap()...),
		processor.WithStateDir(t.TempDir()),
		processor.WithInstanceID("i0"),
		processor.WithHTTP("127.0.0.1:0"),
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 100 * time.Millisecond, MaxInterval: time.Second}),
		processor.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))),
		processor.WithFaultHook(func(p txn.Point) {
			if p == txn.BeforeEnd && armed.CompareAndSwap(true, false) {
				release := make(chan struct{})
				atEnd <- release
				<-release
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("app did not stop within 30s")
		}
	}()
	outCl := b.Client(kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	next := map[string]int64{}
	got := 0
	// readAll reads committed outputs until every key reached its count.
	readAll := func(within time.Duration) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, within)
		defer rcancel()
		total := 0
		for _, n := range want {
			total += int(n)
		}
		for got < total && rctx.Err() == nil {
			select {
			case err := <-done:
				t.Fatalf("app stopped: %v\nlogs:\n%s", err, logs.String())
			default:
			}
			outCl.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
				got++
				v, _ := serde.Int64().Decode(r.Value)
				if k := string(r.Key); v != next[k]+1 {
					t.Errorf("key %s: count %d after %d: a duplicate or a lost update", k, v, next[k])
					next[k] = max(next[k], v)
				} else {
					next[k] = v
				}
			})
		}
		for k, n := range want {
			if next[k] != n {
				t.Fatalf("key %s: final count %d, want %d (read %d of %d outputs)\nlogs:\n%s", k, next[k], n, got, total, logs.String())
			}
		}
	}

	feed(400)
	readAll(90 * time.Second)
	base := "http://" + app.HTTPAddr()

	// SIGKILL: the broker recovers its logs and its coordinators reload
	// the open transaction and the group. (A graceful Stop behaves the
	// same; it costs another 20 s of broker restart, so it is left out.)
	for _, hard := range []bool{true} {
		how := map[bool]string{false: "stopped", true: "SIGKILLed"}[hard]
		armed.Store(true)
		feed(200)
		var release chan struct{}
		select {
		case release = <-atEnd:
		case <-time.After(30 * time.Second):
			t.Fatalf("no commit reached EndTxn within 30s\nlogs:\n%s", logs.String())
		}
		if hard {
			b.Kill()
		} else {
			b.Stop()
		}
		close(release)
		logsBefore := strings.Count(logs.String(), "\n")
		var ru0 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		// Queries during the outage must not fail the App or claim
		// what they cannot know.
		deadline := time.Now().Add(outage)
		for time.Now().Before(deadline) {
			for _, path := range []string{"/readyz", "/frontier", "/stores/counts/keys/sku-01"} {
				code, body := httpGet(t, base+path)
				t.Logf("outage (%s) %s: %d %.300s", how, path, code, strings.TrimSpace(body))
				if code == 0 {
					t.Errorf("%s while the broker was %s: no answer: %s", path, how, body)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("app stopped while the broker was %s: %v\nlogs:\n%s", how, err, logs.String())
			case <-time.After(2 * time.Second):
			}
		}
		var ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime)-syscall.TimevalToNsec(ru0.Utime)) +
			time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))
		t.Logf("broker %s for %s: process CPU %s, %d log lines", how, outage, cpu.Round(time.Millisecond),
			strings.Count(logs.String(), "\n")-logsBefore)
		b.Start()
		feed(200)
		readAll(90 * time.Second)
		t.Logf("after the broker was %s: %d outputs, all exactly once", how, got)
		// Back to serving: ready, and the frontier readable again.
		for _, path := range []string{"/readyz", "/frontier"} {
			code, body := 0, ""
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				if code, body = httpGet(t, base+path); code == http.StatusOK {
					break
				}
			}
			if code != http.StatusOK {
				t.Errorf("%s after the broker was %s and came back: %d %s", path, how, code, body)
			}
		}
	}
	// The outages are visible as session restarts, by cause.
	_, m := httpGet(t, base+"/metrics")
	restarts := 0.0
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "tidemark_session_restarts_total{") {
			t.Log(line)
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			restarts += v
		}
	}
	if restarts < 2 {
		t.Errorf("tidemark_session_restarts_total sums to %v over two outages, want at least 2", restarts)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
