package processor_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// queryAnswer is the JSON of a store query's answer or error.
type queryAnswer struct {
	queryEntry
	Partition  *int32
	Partitions []int32
	Restoring  []int32
	Truncated  bool
	Position   processor.Position
	Changelog  processor.Position
	Entries    []windowEntry
	Error      string
}

type windowEntry struct {
	queryEntry
	Start, End *int64
	Timestamp  *int64
}

// ask GETs a store query and decodes its JSON.
func ask(t *testing.T, url string) (int, queryAnswer) {
	t.Helper()
	a := httpGet(t, url)
	var ans queryAnswer
	if err := json.Unmarshal(a.body, &ans); err != nil {
		t.Fatalf("GET %s: %d %s: %v", url, a.status, a.body, err)
	}
	return a.status, ans
}

// waitReady waits until app has every assigned task restored and serves
// HTTP.
func waitReady(t *testing.T, app *processor.App) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !app.Ready() || app.HTTPAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("app not ready after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "http://" + app.HTTPAddr()
}

func countOf(t *testing.T, value []byte) int64 {
	t.Helper()
	_, v, err := topology.DecodeTimestamped(value)
	if err != nil || len(v) != 8 {
		t.Fatalf("value %x is not a timestamped count", value)
	}
	return int64(binary.BigEndian.Uint64(v))
}

// TestQueriesNeverAnswerUncommittedState is the finding: with commits
// every 10s, records processed into the open transaction must stay
// invisible to queries (not found, then the previous count) until their
// commit, and every answer names the input position it reflects. A bound
// beyond the committed position waits for the commit, or answers 503 with
// the position the state has.
func TestQueriesNeverAnswerUncommittedState(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "iq-committed")
	topo := countTopology(t, appID, in, out)
	longTxn := func(c *processor.Config) { c.TransactionTimeout = time.Minute }
	app, _ := startApp(t, topo, fixedCommits(10*time.Second), longTxn, processor.WithHTTP("127.0.0.1:0"))
	base := waitReady(t, app)
	key := "sku-1"
	url := base + "/stores/counts/keys/" + key
	produce := func(n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Key: []byte(key), Value: []byte("x")}
		}
		kafkatest.Produce(t, recs...)
	}
	committed := func() int64 { return committedOffsets(t, appID, in)[0] }
	ctx := context.Background()

	produce(3)
	waitEndOffsets(t, out, 3) // three counts in the open transaction
	if status, ans := ask(t, url); status != http.StatusNotFound || ans.Position.String() != "" {
		t.Fatalf("before any commit: %d %+v; want 404 at no position", status, ans)
	}
	if res, err := app.Get(ctx, "counts", []byte(key)); err != nil || res.Found {
		t.Fatalf("Get before any commit: %+v, %v; want not found", res, err)
	}
	if c := committed(); c != 0 {
		t.Fatalf("offset %d committed within the first 10s: the checks above prove nothing", c)
	}

	status, ans := ask(t, fmt.Sprintf("%s?min_position=%s:0:3&wait=30s", url, in))
	if status != http.StatusOK || ans.count(t) != 3 || ans.Position.String() != in+":0:3" {
		t.Fatalf("after the first commit: %d %+v; want count 3 at %s:0:3", status, ans, in)
	}
	changelogTopic := changelog.TopicName(appID, "counts")
	if off, ok := ans.Changelog.Offset(changelogTopic, 0); !ok || off < 1 {
		t.Fatalf("answer reflects changelog offsets %v; want %s/0 past its records", ans.Changelog, changelogTopic)
	}

	produce(2)
	waitEndOffsets(t, out, 5) // counts 4 and 5 in the open transaction
	for range 5 {
		status, ans = ask(t, url)
		if status != http.StatusOK || ans.count(t) != 3 || ans.Position.String() != in+":0:3" {
			t.Fatalf("with 4 and 5 uncommitted: %d %+v; want the committed count 3 at %s:0:3", status, ans, in)
		}
		res, err := app.Get(ctx, "counts", []byte(key))
		if err != nil || !res.Found || countOf(t, res.Entries[0].Value) != 3 || res.Position.String() != in+":0:3" {
			t.Fatalf("Get with 4 and 5 uncommitted: %+v, %v; want the committed count 3", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := committed(); c != 3 {
		t.Fatalf("committed offset %d while checking: the commit came early and the checks above prove nothing", c)
	}

	// A bound past the committed position: 503 with the position the
	// state has, after the wait; ErrNotFresh from the Go API.
	status, ans = ask(t, fmt.Sprintf("%s?min_position=%s:0:5&wait=100ms", url, in))
	if status != http.StatusServiceUnavailable || ans.Position.String() != in+":0:3" {
		t.Fatalf("bound %s:0:5 before its commit: %d %+v; want 503 at %s:0:3", in, status, ans, in)
	}
	bound := processor.Position{in: {0: 5}}
	if res, err := app.Get(ctx, "counts", []byte(key), processor.AtLeast(bound, 0)); !errors.Is(err, processor.ErrNotFresh) || res.Position.String() != in+":0:3" {
		t.Fatalf("Get AtLeast %s before its commit: %+v, %v; want ErrNotFresh at %s:0:3", bound, res, err, in)
	}
	// Bounds on other partitions do not concern this key's.
	if res, err := app.Get(ctx, "counts", []byte(key), processor.AtLeast(processor.Position{in: {7: 99}}, 0)); err != nil || countOf(t, res.Entries[0].Value) != 3 {
		t.Fatalf("Get AtLeast a bound on another partition: %+v, %v", res, err)
	}

	// Waiting for it returns with the commit.
	res, err := app.Get(ctx, "counts", []byte(key), processor.AtLeast(bound, 30*time.Second))
	if err != nil || countOf(t, res.Entries[0].Value) != 5 || !res.Position.Covers(bound) {
		t.Fatalf("Get AtLeast %s, waiting: %+v, %v; want count 5", bound, res, err)
	}
	status, ans = ask(t, fmt.Sprintf("%s?min_position=%s:0:5&wait=1s", url, in))
	if status != http.StatusOK || ans.count(t) != 5 || !ans.Position.Covers(bound) {
		t.Fatalf("after the second commit: %d %+v; want count 5 at %s", status, ans, bound)
	}
	if off, _ := ans.Changelog.Offset(changelogTopic, 0); off <= 1 {
		t.Fatalf("changelog offsets %v did not advance with the second commit", ans.Changelog)
	}
	for _, bad := range []string{"?min_position=nope", "?min_position=" + in + ":0:1&wait=forever", "?min_position=" + in + ":0:1&wait=2h"} {
		if a := httpGet(t, url+bad); a.status != http.StatusBadRequest {
			t.Fatalf("GET %s: %d %s, want 400", url+bad, a.status, a.body)
		}
	}
}

// TestQueriesAnswerWhileAnotherTaskRestores: instance b serves one
// partition when it takes the other over from a, whose changelog a
// transaction of a foreign producer pins below the committed position, so
// that b's restore of it waits. Meanwhile b answers its own partition's
// keys at once, and the restoring partition's with 503; once the pin is
// gone, it answers those too, with every count.
func TestQueriesAnswerWhileAnotherTaskRestores(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "iq-restore")
	topo := countTopology(t, appID, in, out)
	want := produceKeysN(t, in, 0, 200, 8, 2)
	appA, stopA := runApp(t, topo, processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"))
	checkCounts(t, out, want)
	appB, _ := runApp(t, topo, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"))
	keysOf := func(p int32) []string {
		var ks []string
		for k := range want {
			if processor.DefaultPartition([]byte(k), 2) == p {
				ks = append(ks, k)
			}
		}
		return ks
	}

	// Which partition each instance got: poll until each serves one.
	var pA, pB int32 = -1, -1
	deadline := time.Now().Add(30 * time.Second)
	for pA < 0 || pB < 0 || pA == pB {
		if time.Now().After(deadline) {
			t.Fatalf("instances did not split the partitions in 30s (a: %d, b: %d)", pA, pB)
		}
		time.Sleep(200 * time.Millisecond)
		pA, pB = -1, -1
		for p := range int32(2) {
			k := keysOf(p)[0]
			if appA.HTTPAddr() != "" && httpGet(t, "http://"+appA.HTTPAddr()+"/stores/counts/keys/"+k).status == http.StatusOK {
				pA = p
			}
			if appB.HTTPAddr() != "" && httpGet(t, "http://"+appB.HTTPAddr()+"/stores/counts/keys/"+k).status == http.StatusOK {
				pB = p
			}
		}
	}
	baseA, baseB := "http://"+appA.HTTPAddr(), "http://"+appB.HTTPAddr()

	// A transaction of another producer pins partition pA of the
	// changelog; a commits more changes of pA past it.
	changelogTopic := changelog.TopicName(appID, "counts")
	pin := kafkatest.Client(t, kgo.TransactionalID(kafkatest.UniqueName(t, "pin")),
		kgo.TransactionTimeout(2*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pin.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := pin.ProduceSync(ctx, &kgo.Record{Topic: changelogTopic, Partition: pA, Key: []byte("kpin"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	more := map[string]int{}
	var recs []*kgo.Record
	for i := range 40 {
		k := keysOf(pA)[i%len(keysOf(pA))]
		more[k]++
		want[k]++
		recs = append(recs, &kgo.Record{Topic: in, Partition: pA, Key: []byte(k), Value: []byte("x")})
	}
	kafkatest.Produce(t, recs...)
	end := endOffsets(t, in)
	keyA := keysOf(pA)[0]
	if status, ans := ask(t, fmt.Sprintf("%s/stores/counts/keys/%s?min_position=%s:%d:%d&wait=30s", baseA, keyA, in, pA, end[pA])); status != http.StatusOK || ans.count(t) != int64(want[keyA]) {
		t.Fatalf("a after its commit: %d %+v; want %s = %d", status, ans, keyA, want[keyA])
	}
	stopA()

	// b takes pA over and its restore waits for the pin.
	deadline = time.Now().Add(60 * time.Second)
	for {
		status, ans := ask(t, baseB+"/stores/counts/keys/"+keyA)
		if status == http.StatusServiceUnavailable && strings.Contains(ans.Error, "restor") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b answers %s of partition %d with %d %+v after a left, want 503 while it restores", keyA, pA, status, ans)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if a := httpGet(t, baseB+"/readyz"); a.status != http.StatusServiceUnavailable {
		t.Fatalf("b is ready (%d) with a restore that should be waiting for the pinned changelog", a.status)
	}
	for _, k := range keysOf(pB) {
		start := time.Now() // waiting for the pinned restore would never end
		status, ans := ask(t, baseB+"/stores/counts/keys/"+k)
		if took := time.Since(start); status != http.StatusOK || ans.count(t) != int64(want[k]) || took > 20*time.Second {
			t.Fatalf("b's own key %s during the restore: %d %+v in %s; want %d at once", k, status, ans, took, want[k])
		}
		if off, ok := ans.Position.Offset(in, pB); !ok || off != end[pB] {
			t.Fatalf("b's own key %s: position %s, want %s:%d:%d", k, ans.Position, in, pB, end[pB])
		}
	}
	var rg queryAnswer
	getJSON(t, baseB+"/stores/counts/range", &rg)
	if len(rg.Partitions) != 1 || rg.Partitions[0] != pB || len(rg.Restoring) != 1 || rg.Restoring[0] != pA {
		t.Fatalf("b's range reads partitions %v, restoring %v; want [%d] and [%d]", rg.Partitions, rg.Restoring, pB, pA)
	}
	if _, err := appB.Get(ctx, "counts", []byte(keyA)); !errors.Is(err, processor.ErrRestoring) {
		t.Fatalf("Get of %s during its restore: %v, want ErrRestoring", keyA, err)
	}

	if err := pin.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	for _, k := range keysOf(pA) {
		ans := waitAnswer(t, fmt.Sprintf("%s/stores/counts/keys/%s?min_position=%s:%d:%d&wait=30s", baseB, k, in, pA, end[pA]))
		if ans.count(t) != int64(want[k]) {
			t.Fatalf("b's taken-over key %s after its restore: %+v; want %d", k, ans, want[k])
		}
	}
}

// waitAnswer asks until the answer is 200, for 30s.
func waitAnswer(t *testing.T, url string) queryAnswer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, ans := ask(t, url)
		if status == http.StatusOK {
			return ans
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %+v after 30s", url, status, ans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
