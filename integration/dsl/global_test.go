package dsl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// restoreLog records, in order, the "global stores restored" lines of an
// app (how many global records each start read before its tasks ran) and
// its tasks' "task state" lines.
type restoreLog struct {
	slog.Handler
	mu      *sync.Mutex
	records *[]int64
	events  *[]string
}

func newRestoreLog() restoreLog {
	return restoreLog{Handler: slog.DiscardHandler, mu: &sync.Mutex{}, records: new([]int64), events: new([]string)}
}

func (h restoreLog) Enabled(context.Context, slog.Level) bool { return true }
func (h restoreLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h restoreLog) WithGroup(string) slog.Handler            { return h }
func (h restoreLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "global stores restored" && r.Message != "task state" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case r.Message == "global stores restored" && a.Key == "records":
			*h.records = append(*h.records, a.Value.Int64())
			*h.events = append(*h.events, "global restored")
		case r.Message == "task state" && a.Key == "state":
			*h.events = append(*h.events, "task "+a.Value.String())
		}
		return true
	})
	return nil
}

// nth waits for the n-th start's restore (1-based) and returns how many
// records it read.
func (h restoreLog) nth(t *testing.T, n int) int64 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		h.mu.Lock()
		got := len(*h.records)
		var v int64
		if got >= n {
			v = (*h.records)[n-1]
		}
		h.mu.Unlock()
		if got >= n {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("start %d logged no global restore within 30s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGlobalTableAcrossRestart runs a stream-global join (stream: 2
// partitions; global topic: 3, so not co-partitioned) on the broker in
// three runs of one service: the first with global records and stream
// records already in their topics before it starts (the first stream record
// must see every global record: the global store is restored before any
// task runs); the second with a fresh state directory (the global store is
// reloaded from its whole topic, with the updates made while nothing ran);
// the third with the second's directory (only the topic's tail is read).
// Global updates happen only while no app runs, so each stream record's
// expected output is joiner(record, model at that phase), for the inner and
// the left join.
func TestGlobalTableAcrossRestart(t *testing.T) {
	rng := seeded(t)
	// Global topics are compacted in production; these are not, so that
	// the counts of records each start reads are exact (the broker's
	// cleaner may compact a topic within seconds of its writes).
	merchantsTopic := kafkatest.NewTopic(t, 3, nil)
	ordersTopic := kafkatest.NewTopic(t, 2, nil)
	joinedTopic := kafkatest.NewTopic(t, 2, nil)
	leftTopic := kafkatest.NewTopic(t, 2, nil)
	app := kafkatest.UniqueName(t, "app")
	build := func() *topology.Topology {
		b := topology.NewBuilder(app, topology.RequireNamedState())
		merchants := b.GlobalTable(merchantsTopic, serde.String(), serde.String(), topology.Named("merchants"))
		orders := b.Stream(ordersTopic, serde.String(), serde.String())
		keyOf := func(_, v string) string { m, _, _ := strings.Cut(v, "|"); return m }
		orders.JoinGlobal(merchants, keyOf, func(k, v, m string) string { return k + "/" + v + "@" + m },
			topology.Named("enrich")).To(joinedTopic)
		orders.LeftJoinGlobal(merchants, keyOf, func(k, v, m string, found bool) string {
			return fmt.Sprintf("%s/%s@%s:%v", k, v, m, found)
		}, topology.Named("enrich-left")).To(leftTopic)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}

	model := map[string]string{}
	globalRecords := 0
	updateGlobal := func(n int) int {
		recs := make([]record, 0, n)
		for i := range n {
			m := fmt.Sprintf("m%d", rng.IntN(12))
			r := record{key: m, ts: int64(1000 + i)}
			if len(model) > 0 && rng.IntN(5) == 0 {
				r.tombstone = true
				delete(model, m)
			} else {
				r.value = fmt.Sprintf("name-%d-%d", globalRecords, i)
				model[m] = r.value
			}
			recs = append(recs, r)
		}
		produce(t, merchantsTopic, 3, recs...)
		globalRecords += n
		return n
	}
	var wantJoined, wantLeft []string
	order := 0
	feedOrders := func(n int) {
		recs := make([]record, 0, n)
		for range n {
			order++
			key := fmt.Sprintf("o%d", rng.IntN(30))
			m := fmt.Sprintf("m%d", rng.IntN(14)) // m12, m13 never exist
			// Out-of-order event times: a global join ignores them.
			r := record{key: key, value: fmt.Sprintf("%s|p%d", m, order), ts: int64(10_000 + order*10 - rng.IntN(50))}
			if rng.IntN(15) == 0 {
				r.tombstone, r.value = true, ""
			}
			recs = append(recs, r)
			if r.tombstone {
				continue
			}
			gv, found := model[m]
			if found {
				wantJoined = append(wantJoined, key+"/"+r.value+"@"+gv)
			}
			wantLeft = append(wantLeft, fmt.Sprintf("%s/%s@%s:%v", key, r.value, gv, found))
		}
		produce(t, ordersTopic, 2, recs...)
	}
	check := func(phase string) {
		t.Helper()
		for _, c := range []struct {
			topic string
			want  []string
		}{{joinedTopic, wantJoined}, {leftTopic, wantLeft}} {
			got := readUntil(t, c.topic, 45*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= len(c.want) })
			vals := make([]string, 0, len(got))
			for _, r := range got {
				vals = append(vals, string(r.Value))
			}
			want := slices.Clone(c.want)
			slices.Sort(vals)
			slices.Sort(want)
			if !slices.Equal(vals, want) {
				t.Fatalf("%s: %s has %d outputs, model %d; first difference: %s", phase, c.topic, len(vals), len(want), firstDiff(vals, want))
			}
		}
	}
	run := func(dir string, log restoreLog, opts ...processor.Option) (stop func()) {
		return startApp(t, build(), dir, append(opts, processor.WithLogger(slog.New(log)))...)
	}

	// Run 1: everything is in the topics before the app starts.
	updateGlobal(60)
	feedOrders(40)
	log := newRestoreLog()
	stop := run(t.TempDir(), log)
	check("run 1")
	if got := log.nth(t, 1); got != int64(globalRecords) {
		t.Errorf("run 1 restored %d global records, want all %d", got, globalRecords)
	}
	stop()

	// Run 2: a fresh state dir reloads the whole global topic, including
	// what changed while nothing ran.
	updateGlobal(30)
	dir := t.TempDir()
	stop = run(dir, log)
	if got := log.nth(t, 2); got != int64(globalRecords) {
		t.Errorf("run 2 (fresh dir) restored %d global records, want all %d", got, globalRecords)
	}
	feedOrders(40)
	check("run 2")
	stop()

	// Run 3: the same dir reads only the tail.
	tail := updateGlobal(15)
	httpAddr := freeAddr(t)
	stop = run(dir, log, processor.WithHTTP(httpAddr))
	if got := log.nth(t, 3); got != int64(tail) {
		t.Errorf("run 3 (same dir) restored %d global records, want the %d of the tail", got, tail)
	}
	feedOrders(40)
	check("run 3")

	// While it runs, the global goroutine keeps the store current: an
	// update shows in an interactive query of the global store (any
	// instance answers for every key), then in the joins.
	produce(t, merchantsTopic, 3, record{key: "m3", value: "live", ts: 5000})
	model["m3"] = "live"
	globalRecords++
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, found := queryGlobal(t, httpAddr, "merchants", "m3")
		if found && v == "live" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the global store did not follow its topic: GET m3 = %q (found %v) after 20s", v, found)
		}
		time.Sleep(50 * time.Millisecond)
	}
	feedOrders(30)
	check("run 3, after a live update")
	metrics := httpGet(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{
		fmt.Sprintf("tidemark_global_restore_records_total{app=%q} %d", app, tail),
		fmt.Sprintf("tidemark_global_records_total{app=%q,store=\"merchants\"} %d", app, tail+1),
		fmt.Sprintf("tidemark_global_lag_records{app=%q,store=\"merchants\"} 0", app),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	stop()

	// Run 4: damaged local state of the global store (its Badger
	// MANIFEST overwritten) is moved aside and the store reloaded whole.
	updateGlobal(5)
	manifest := filepath.Join(dir, "global", "merchants", "MANIFEST")
	if err := os.WriteFile(manifest, []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop = run(dir, log)
	if got := log.nth(t, 4); got != int64(globalRecords) {
		t.Errorf("run 4 (damaged global state) restored %d global records, want all %d", got, globalRecords)
	}
	feedOrders(20)
	check("run 4")
	stop()
}

// freeAddr is a free 127.0.0.1 port for an app's HTTP server.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// queryGlobal reads key from the global store through the app's /stores
// endpoint.
func queryGlobal(t *testing.T, addr, storeName, key string) (string, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/stores/" + storeName + "/keys/" + key)
	if err != nil {
		return "", false // not serving yet
	}
	defer resp.Body.Close()
	var body struct {
		Value, Encoding, Error string
		Timestamp              *int64
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if body.Encoding != "utf8" || body.Timestamp == nil {
			t.Fatalf("GET %s: %+v: want a utf8 value with its timestamp", key, body)
		}
		return body.Value, true
	case http.StatusNotFound:
		return "", false
	}
	t.Fatalf("GET %s: %d %s", key, resp.StatusCode, body.Error)
	return "", false
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("got %q, model %q", g, w)
		}
	}
	return "none"
}

// TestGlobalTableRestoredBeforeFirstRecord: a global topic with many
// versions of each key and stream records that are all in their topic
// before the app starts. Every stream record must join with the last
// version (the global store is complete before a task exists), and the
// app's log shows the global restore before any task's first state.
func TestGlobalTableRestoredBeforeFirstRecord(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testGlobalRestoredFirst(t, false) })
	// A compacted topic may lose its old versions before the app reads
	// it: the outputs must be the same, only fewer records are read.
	t.Run("compacted", func(t *testing.T) { testGlobalRestoredFirst(t, true) })
}

func testGlobalRestoredFirst(t *testing.T, compacted bool) {
	rng := seeded(t)
	var conf map[string]string
	if compacted {
		conf = map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
	}
	globalTopic := kafkatest.NewTopic(t, 3, conf)
	ordersTopic := kafkatest.NewTopic(t, 2, nil)
	outTopic := kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	g := b.GlobalTable(globalTopic, serde.String(), serde.String(), topology.Named("tenants"))
	b.Stream(ordersTopic, serde.String(), serde.String()).
		LeftJoinGlobal(g, func(_, v string) string { return v }, func(k, v, tenant string, found bool) string {
			return fmt.Sprintf("%s@%s:%v", k, tenant, found)
		}).To(outTopic)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	const keys, versions = 40, 100
	model := map[string]string{}
	var recs []record
	for v := range versions {
		for k := range keys {
			key := fmt.Sprintf("tenant%d", k)
			r := record{key: key, value: fmt.Sprintf("%s-v%d", key, v), ts: int64(v)}
			if v == versions-1 && k%7 == 0 {
				r.tombstone, r.value = true, ""
				delete(model, key)
			} else {
				model[key] = r.value
			}
			recs = append(recs, r)
		}
	}
	produce(t, globalTopic, 3, recs...)
	// Transactions on the global topic: an aborted one whose values must
	// never show, then a committed one, so that every partition ends with
	// a commit marker the restore must read past to finish.
	for _, commit := range []bool{false, true} {
		var txnRecs []*kgo.Record
		for k := range keys {
			key := fmt.Sprintf("tenant%d", k)
			if commit && k%5 != 0 {
				continue
			}
			value := "aborted"
			if commit {
				value = key + "-committed"
				model[key] = value
			}
			txnRecs = append(txnRecs, &kgo.Record{Topic: globalTopic, Key: []byte(key), Value: []byte(value),
				Partition: processor.DefaultPartition([]byte(key), 3)})
		}
		produceTxn(t, commit, txnRecs...)
	}
	var want []string
	var orders []record
	for i := range 60 {
		tenant := fmt.Sprintf("tenant%d", rng.IntN(keys))
		key := fmt.Sprintf("order%d", i)
		orders = append(orders, record{key: key, value: tenant, ts: int64(i)})
		gv, found := model[tenant]
		want = append(want, fmt.Sprintf("%s@%s:%v", key, gv, found))
	}
	produce(t, ordersTopic, 2, orders...)

	log := newRestoreLog()
	startApp(t, topo, t.TempDir(), processor.WithLogger(slog.New(log)))
	got := readUntil(t, outTopic, 45*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
	vals := make([]string, 0, len(got))
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	slices.Sort(vals)
	slices.Sort(want)
	if !slices.Equal(vals, want) {
		t.Fatalf("%d outputs, model %d; first difference: %s", len(vals), len(want), firstDiff(vals, want))
	}
	if n := log.nth(t, 1); !compacted && n != keys*versions+keys/5 {
		t.Errorf("restored %d global records, want %d (the aborted ones are not read)", n, keys*versions+keys/5)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if ev := *log.events; len(ev) == 0 || ev[0] != "global restored" {
		t.Errorf("log order %v: the global restore must come before every task", ev)
	}
}

// produceTxn writes recs in one transaction and commits or aborts it.
func produceTxn(t *testing.T, commit bool, recs ...*kgo.Record) {
	t.Helper()
	cl := kafkatest.Client(t, kgo.TransactionalID(kafkatest.UniqueName(t, "txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce in a transaction: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
	// EndTxn returns before the coordinator has written the markers: until
	// then the partitions' last stable offset stays below the records, and
	// a read_committed reader that starts now (a restore) ends without
	// them. Wait for the markers, so a test knows where its input ends.
	topics := map[string]bool{}
	for _, r := range recs {
		topics[r.Topic] = true
	}
	adm := kadm.NewClient(cl)
	for topic := range topics {
		for {
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err == nil {
				err = ends.Error()
			}
			stable, serr := adm.ListCommittedOffsets(ctx, topic)
			if serr == nil {
				serr = stable.Error()
			}
			if err == nil && serr == nil {
				settled := true
				ends.Each(func(o kadm.ListedOffset) {
					if s, ok := stable.Lookup(o.Topic, o.Partition); !ok || s.Offset < o.Offset {
						settled = false
					}
				})
				if settled {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("transaction markers of %s not written: %v %v", topic, err, serr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
