package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// TestFreshBrokerCommitsDoNotStall is the regression test for the
// multi-second stall of the first transactional run on a freshly started
// broker (transaction version 2, KIP-890 part 2).
//
// Under transactions v2, EndTxn returns once PREPARE_COMMIT is logged and the
// markers are written afterwards. A produce of the next transaction that
// arrives meanwhile is checked against the coordinator (an implicit
// AddPartitionsToTxn), which answers CONCURRENT_TRANSACTIONS; the broker
// retries that for add.partitions.to.txn.retry.backoff.max.ms (100ms) and then
// returns it to the client. On a just-started broker the first markers take
// longer than that (a new marker connection, a cold JVM). franz-go v1.22.3
// retries such a batch only after a metadata refresh, which it rate-limits to
// MetadataMinAge (default 5s): the commit's flush stalled for 3.4–5.1s. (It
// has also pipelined the partition's next batches, which the broker rejects
// with OutOfOrderSequenceException, "Expected sequence 0 for transactions v2
// idempotent producer with no existing state", and franz-go resends in order:
// noisy in the broker log, harmless.)
//
// The broker here runs with add.partitions.to.txn.retry.backoff.max.ms=0, so
// that the condition, a matter of luck on a fresh broker, happens on many
// commits. tidemark sets MetadataMinAge to 250ms, which bounds each such wait;
// the test checks that no commit's flush waits anywhere near franz-go's 5s,
// that the retries are visible in tidemark_produce_retries_total, and that
// every output is committed exactly once.
func TestFreshBrokerCommitsDoNotStall(t *testing.T) {
	b := kafkatest.PrivateBrokerWith(t, map[string]string{"add.partitions.to.txn.retry.backoff.max.ms": "0"})
	seed := b.Bootstrap()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const n, in, out = 100000, "words", "counts"
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{in, out} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		k := fmt.Sprintf("sku-%02d", i%12)
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
			Partition: processor.DefaultPartition([]byte(k), 2)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce input: %v", err)
	}

	bld := topology.NewBuilder("fresh")
	bld.Stream(in, serde.String(), serde.String()).
		GroupByKey(topology.Named("counts")).
		Count(topology.Named("counts")).
		ToStream().To(out)
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var begun time.Time
	var flushes []time.Duration // from the commit's start to BeforeEnd: the flush
	app, err := processor.NewApp(topo,
		processor.WithBrokers(seed),
		processor.WithStateDir(t.TempDir()),
		processor.WithInstanceID("i0"),
		processor.WithHTTP("127.0.0.1:0"),
		// 20 ms and 100k records: about 50 commits. The override provokes
		// the condition on a share of commits (2–6 of 16 at 50 ms here),
		// and a clean-clone CI run once saw none in 16.
		processor.WithCommitPolicy(frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: 20 * time.Millisecond}),
		processor.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		processor.WithFaultHook(func(p txn.Point) {
			mu.Lock()
			defer mu.Unlock()
			switch p {
			case txn.BeforeFlush:
				begun = time.Now()
			case txn.BeforeEnd:
				if !begun.IsZero() {
					flushes = append(flushes, time.Since(begun))
				}
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()

	outCl := b.Client(kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[string]int64{}
	got := 0
	for got < n && ctx.Err() == nil {
		outCl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got++
			v, _ := serde.Int64().Decode(r.Value)
			if k := string(r.Key); v != next[k]+1 {
				t.Errorf("key %s: count %d after %d", k, v, next[k])
			} else {
				next[k] = v
			}
		})
	}
	retries := metric(t, "http://"+app.HTTPAddr()+"/metrics", "tidemark_produce_retries_total")
	stop()
	if err := <-done; err != nil {
		t.Errorf("app run: %v", err)
	}
	if got != n {
		t.Fatalf("read %d committed outputs, want %d", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	var worst time.Duration
	for _, d := range flushes {
		worst = max(worst, d)
	}
	t.Logf("%d commits, longest flush %v, %v produce retries", len(flushes), worst.Round(time.Millisecond), retries)
	// 3 s: below the 3.4 s the bug's shortest stall took, and above what
	// a private broker's first commits cost on a loaded 2-core machine.
	if worst >= 3*time.Second {
		t.Errorf("a commit's flush took %v: a batch turned away with CONCURRENT_TRANSACTIONS waited for franz-go's rate-limited metadata refresh (5s without tidemark's MetadataMinAge)", worst.Round(time.Millisecond))
	}
	if retries == 0 {
		t.Errorf("tidemark_produce_retries_total is 0: the broker override provokes CONCURRENT_TRANSACTIONS on most commits, and the retries must be visible")
	}
}

// metric reads one counter from a Prometheus text page.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
