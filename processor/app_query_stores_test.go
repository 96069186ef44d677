package processor_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// span is a window or session and its count, as the reference computes
// them and as queries answer.
type span struct {
	key        string
	start, end int64
	count      int64
}

func (s span) String() string { return fmt.Sprintf("%s[%d,%d]=%d", s.key, s.start, s.end, s.count) }

// windowRefs computes tumbling-window counts: window [start, start+size).
func windowRefs(ts map[string][]int64, size int64) map[string][]span {
	out := map[string][]span{}
	for k, tss := range ts {
		counts := map[int64]int64{}
		for _, t := range tss {
			counts[t-t%size]++
		}
		for _, start := range slices.Sorted(maps.Keys(counts)) {
			out[k] = append(out[k], span{k, start, start + size, counts[start]})
		}
	}
	return out
}

// sessionRefs computes session counts: records at most gap apart join one
// session [first, last]; in end then start order.
func sessionRefs(ts map[string][]int64, gap int64) map[string][]span {
	out := map[string][]span{}
	for k, tss := range ts {
		sorted := slices.Sorted(slices.Values(tss))
		cur := span{k, sorted[0], sorted[0], 0}
		for _, t := range sorted {
			if t-cur.end > gap {
				out[k] = append(out[k], cur)
				cur = span{k, t, t, 0}
			}
			cur.end = t
			cur.count++
		}
		out[k] = append(out[k], cur)
	}
	return out
}

// spansOfHTTP decodes the entries of a window or session answer.
func spansOfHTTP(t *testing.T, ans queryAnswer) []span {
	t.Helper()
	var out []span
	for _, e := range ans.Entries {
		if e.Start == nil || e.End == nil || e.Timestamp == nil || e.Encoding != "base64" {
			t.Fatalf("entry %+v lacks start, end, timestamp or a base64 count", e)
		}
		b, err := base64.StdEncoding.DecodeString(e.Value)
		if err != nil || len(b) != 8 {
			t.Fatalf("entry %+v: value is not a count", e)
		}
		out = append(out, span{e.Key, *e.Start, *e.End, int64(binary.BigEndian.Uint64(b))})
	}
	return out
}

func spansOf(t *testing.T, res processor.QueryResult) []span {
	t.Helper()
	var out []span
	for _, e := range res.Entries {
		out = append(out, span{string(e.Key), e.Start, e.End, countOf(t, e.Value)})
	}
	return out
}

func equalSpans(t *testing.T, what string, got, want []span) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestWindowAndSessionStoreQueries counts clicks per 10s tumbling window
// and per session (5s gap) on two partitions, and checks every window and
// session query, over HTTP and the Go API, against counts computed here.
func TestWindowAndSessionStoreQueries(t *testing.T) {
	t.Parallel()
	in := kafkatest.NewTopic(t, 2, nil)
	outW, outS := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "iq-windows"))
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, time.Hour)).
		Count(topology.Named("clicks-10s")).ToStream().To(outW)
	topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, time.Hour)).
		Count(topology.Named("visits")).ToStream().To(outS)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}

	const base = int64(1_700_000_000_000) // a multiple of 10s
	r := rand.New(rand.NewPCG(1, 2))
	ts := map[string][]int64{}
	var recs []*kgo.Record
	for i := range 150 {
		k := fmt.Sprintf("user-%d", i%6)
		at := base + int64(r.IntN(120))*1000 // seconds apart: sessions both merge and split
		ts[k] = append(ts[k], at)
		recs = append(recs, &kgo.Record{Topic: in, Partition: processor.DefaultPartition([]byte(k), 2),
			Key: []byte(k), Value: []byte("click"), Timestamp: time.UnixMilli(at)})
	}
	kafkatest.Produce(t, recs...)
	wantW, wantS := windowRefs(ts, 10_000), sessionRefs(ts, 5_000)

	app, _ := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))
	end := endOffsets(t, in)
	fresh := fmt.Sprintf("min_position=%s:0:%d&min_position=%s:1:%d&wait=30s", in, end[0], in, end[1])
	bound := processor.Position{in: end}
	ctx := context.Background()
	url := waitReady(t, app)

	for _, k := range slices.Sorted(maps.Keys(ts)) {
		p := processor.DefaultPartition([]byte(k), 2)
		status, ans := ask(t, fmt.Sprintf("%s/stores/clicks-10s/windows/%s?%s", url, k, fresh))
		if status != http.StatusOK || ans.Partition == nil || *ans.Partition != p || !ans.Position.Covers(processor.Position{in: {p: end[p]}}) {
			t.Fatalf("windows of %s: %d %+v", k, status, ans)
		}
		equalSpans(t, "HTTP windows of "+k, spansOfHTTP(t, ans), wantW[k])

		from, to := base+20_000, base+60_000
		var some []span
		for _, w := range wantW[k] {
			if w.start >= from && w.start <= to {
				some = append(some, w)
			}
		}
		_, ans = ask(t, fmt.Sprintf("%s/stores/clicks-10s/windows/%s?from=%d&to=%d", url, k, from, to))
		equalSpans(t, fmt.Sprintf("HTTP windows of %s starting in [%d, %d]", k, from, to), spansOfHTTP(t, ans), some)
		res, err := app.FetchWindows(ctx, "clicks-10s", []byte(k), from, to, processor.AtLeast(bound, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		equalSpans(t, "FetchWindows of "+k, spansOf(t, res), some)

		status, ans = ask(t, fmt.Sprintf("%s/stores/visits/sessions/%s?%s", url, k, fresh))
		if status != http.StatusOK {
			t.Fatalf("sessions of %s: %d %+v", k, status, ans)
		}
		equalSpans(t, "HTTP sessions of "+k, spansOfHTTP(t, ans), wantS[k])
		res, err = app.FetchSessions(ctx, "visits", []byte(k), math.MinInt64, math.MaxInt64, processor.AtLeast(bound, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		equalSpans(t, "FetchSessions of "+k, spansOf(t, res), wantS[k])
		// Sessions overlapping [from, to]: end ≥ from, start ≤ to.
		some = nil
		for _, s := range wantS[k] {
			if s.end >= from && s.start <= to {
				some = append(some, s)
			}
		}
		res, err = app.FetchSessions(ctx, "visits", []byte(k), from, to)
		if err != nil {
			t.Fatal(err)
		}
		equalSpans(t, fmt.Sprintf("FetchSessions of %s overlapping [%d, %d]", k, from, to), spansOf(t, res), some)
	}

	// Every key's windows, partition by partition, each by key then start.
	var all []span
	for p := range int32(2) {
		for _, k := range slices.Sorted(maps.Keys(ts)) {
			if processor.DefaultPartition([]byte(k), 2) == p {
				all = append(all, wantW[k]...)
			}
		}
	}
	status, ans := ask(t, fmt.Sprintf("%s/stores/clicks-10s/windows?%s&limit=10000", url, fresh))
	if status != http.StatusOK || !slices.Equal(ans.Partitions, []int32{0, 1}) || ans.Truncated {
		t.Fatalf("all windows: %d %+v", status, ans)
	}
	equalSpans(t, "HTTP all windows", spansOfHTTP(t, ans), all)
	_, ans = ask(t, url+"/stores/clicks-10s/windows?limit=5")
	if !ans.Truncated {
		t.Fatalf("all windows, limit 5: not truncated: %+v", ans)
	}
	equalSpans(t, "HTTP all windows, limit 5", spansOfHTTP(t, ans), all[:5])
	res, err := app.FetchAllWindows(ctx, "clicks-10s", math.MinInt64, math.MaxInt64, 0, processor.AtLeast(bound, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	equalSpans(t, "FetchAllWindows", spansOf(t, res), all)

	// Wrong kinds, unknown stores, bad parameters.
	for path, code := range map[string]int{
		"/stores/clicks-10s/keys/user-1":           http.StatusBadRequest,
		"/stores/visits/windows/user-1":            http.StatusBadRequest,
		"/stores/clicks-10s/sessions/user-1":       http.StatusBadRequest,
		"/stores/nope/sessions/user-1":             http.StatusNotFound,
		"/stores/nope/windows":                     http.StatusNotFound,
		"/stores/clicks-10s/windows/user-1?from=x": http.StatusBadRequest,
		"/stores/clicks-10s/windows?limit=many":    http.StatusBadRequest,
	} {
		if a := httpGet(t, url+path); a.status != code || !strings.Contains(string(a.body), `"error"`) {
			t.Errorf("GET %s: %d %s, want %d", path, a.status, a.body, code)
		}
	}
	if _, err := app.Get(ctx, "visits", []byte("user-1")); !errors.Is(err, processor.ErrStoreKind) {
		t.Errorf("Get on a session store: %v, want ErrStoreKind", err)
	}
	if _, err := app.FetchWindows(ctx, "nope", []byte("user-1"), 0, 1); !errors.Is(err, processor.ErrUnknownQueryStore) {
		t.Errorf("FetchWindows of an unknown store: %v, want ErrUnknownQueryStore", err)
	}
}
