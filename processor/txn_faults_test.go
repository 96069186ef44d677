package processor_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/processor"
)

// Tests of the commit path under broker-side errors, on kfake with
// injected faults: a retriable error is ridden through (never fatal) and
// every input's output is committed exactly once.

// syncBuf is a log sink written by the App's goroutines and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type faultRig struct {
	t        *testing.T
	c        *kfake.Cluster
	in, out  string
	app      *processor.App
	done     <-chan error
	logs     *syncBuf
	want     map[string]int
	produced int
}

func newFaultRig(t *testing.T, opts ...processor.Option) *faultRig {
	t.Helper()
	r := &faultRig{t: t, in: "in", out: "out", logs: &syncBuf{}, want: map[string]int{}}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, r.in, r.out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r.c = c
	appID := "faults-" + strings.ReplaceAll(t.Name(), "/", "-")
	topo := countTopology(t, appID, r.in, r.out)
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	app, err := processor.NewApp(topo, append([]processor.Option{processor.WithBrokers(c.ListenAddrs()...),
		processor.WithStateDir(t.TempDir()), processor.WithLogger(log), processor.WithHTTP("127.0.0.1:0"),
		fixedCommits(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- app.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Errorf("app did not stop within 30s")
		}
	})
	r.app, r.done = app, done
	return r
}

func (r *faultRig) client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	return cl
}

// feed produces n more inputs over 8 keys.
func (r *faultRig) feed(n int) {
	r.t.Helper()
	var recs []*kgo.Record
	for i := r.produced; i < r.produced+n; i++ {
		k := fmt.Sprintf("sku-%02d", i%8)
		r.want[k]++
		recs = append(recs, &kgo.Record{Topic: r.in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
			Partition: processor.DefaultPartition([]byte(k), 2)})
	}
	r.produced += n
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// check reads the committed output and asserts every key counts 1, 2, …
// up to what was fed: no duplicate, no loss. The app must not have failed.
func (r *faultRig) check(within time.Duration) {
	r.t.Helper()
	total := 0
	for _, n := range r.want {
		total += n
	}
	cl := r.client(kgo.ConsumeTopics(r.out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var got []*kgo.Record
	for len(got) < total && ctx.Err() == nil {
		select {
		case err := <-r.done:
			r.t.Fatalf("app stopped: %v\nlogs:\n%s", err, r.logs.String())
		default:
		}
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { got = append(got, rec) })
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer qcancel()
	for qctx.Err() == nil {
		cl.PollFetches(qctx).EachRecord(func(rec *kgo.Record) { got = append(got, rec) })
	}
	next := map[string]int64{}
	for _, rec := range got {
		k := string(rec.Key)
		n := int64(binary.BigEndian.Uint64(rec.Value))
		if n != next[k]+1 {
			r.t.Fatalf("key %s: count %d after %d: a duplicate or a lost update\nlogs:\n%s", k, n, next[k], r.logs.String())
		}
		next[k] = n
	}
	for k, n := range r.want {
		if next[k] != int64(n) {
			r.t.Fatalf("key %s: final count %d, want %d (read %d of %d outputs)\nlogs:\n%s", k, next[k], n, len(got), total, r.logs.String())
		}
	}
}

// metric sums the /metrics lines that start with name and contain every
// one of labels.
func (r *faultRig) metric(name string, labels ...string) float64 {
	r.t.Helper()
	resp, err := http.Get("http://" + r.app.HTTPAddr() + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
next:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// warmUp waits for the app to commit a first batch, so faults hit a
// running session rather than its start.
func (r *faultRig) warmUp() {
	r.t.Helper()
	r.feed(40)
	r.check(20 * time.Second)
}

// An EndTxn whose outcome the client cannot confirm (here it timed out
// before the broker acted on it) leaves the transaction open broker-side,
// its offsets pending. The commit must learn the outcome at once (franz-go's
// documented heal: end it with TryAbort, which bumps the producer epoch and
// aborts whatever is still open) rather than wait on the stable offsets
// until the broker times the transaction out: all processing stalled for
// the transaction timeout.
func TestUnconfirmedEndTxnDoesNotStallForTheTransactionTimeout(t *testing.T) {
	r := newFaultRig(t, func(c *processor.Config) { c.TransactionTimeout = 20 * time.Second })
	r.warmUp()
	h := r.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true})
	r.feed(40)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hit := time.Now()
	r.feed(40)
	r.check(30 * time.Second)
	if took := time.Since(hit); took > 5*time.Second {
		t.Fatalf("outputs committed %s after the unconfirmed EndTxn (transaction timeout 20s): the commit waited for the broker to time the transaction out\nlogs:\n%s",
			took.Round(100*time.Millisecond), r.logs.String())
	}
}
