package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/frontier/watch"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// windowApp counts records per key in 10 s tumbling windows with 5 s grace
// and emits only final results.
func windowApp(t *testing.T, app, in, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app)
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, 5*time.Second)).
		Count(topology.Named("per-window"), topology.EmitFinal()).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// windowBase is an event time a little in the past on a 10 s boundary.
func windowBase() int64 {
	now := time.Now().Add(-time.Minute).UnixMilli()
	return now - now%10000
}

func produceAt(t *testing.T, topic string, p int32, key string, ts ...int64) {
	t.Helper()
	var recs []*kgo.Record
	for _, at := range ts {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(at)})
	}
	kafkatest.Produce(t, recs...)
}

// waitConsumed waits until the group committed n input records of topic
// partition 0: the transaction that carried them (and the frontier
// records) is complete.
func waitConsumed(t *testing.T, group, topic string, n int64) {
	t.Helper()
	adm := kafkatest.Admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err == nil {
			if o, ok := offs.Lookup(topic, 0); ok && o.At >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not commit %d records of %s: %v %v", group, n, topic, offs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// baseURL waits for the app's HTTP server to listen.
func baseURL(t *testing.T, app *processor.App) string {
	t.Helper()
	for range 200 {
		if a := app.HTTPAddr(); a != "" {
			return "http://" + a
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the app's HTTP server did not start")
	return ""
}

func covers(t *testing.T, base, sink string, at int64) bool {
	t.Helper()
	var fr frontierAnswer
	getJSON(t, fmt.Sprintf("%s/frontier?sink=%s&covers=%d", base, sink, at), &fr)
	c := fr.Sinks[sink].Covers
	if c == nil {
		t.Fatalf("/frontier?covers=%d: no covers answer: %+v", at, fr)
	}
	return *c
}

// finalCount finds the final count of key k's window starting at start in
// recs (the sink's key is the windowed key as Kafka Streams writes it: k, start).
func finalCount(recs []*kgo.Record, k string, start int64) (int64, bool) {
	for _, r := range recs {
		if len(r.Key) == len(k)+8 && string(r.Key[:len(k)]) == k && int64(binary.BigEndian.Uint64(r.Key[len(k):])) == start {
			return int64(binary.BigEndian.Uint64(r.Value)), true
		}
	}
	return 0, false
}

// TestFrontierCoversAWindowOnlyOnceItsFinalResultIsReadable is finding 7
// of "Guarantees that hold under faults": with a 10 s tumbling window, 5 s
// grace and emit-final, "covers 9 999" was true at stream time 12 s, before
// the window's final result existed. It must turn true exactly when the
// result is committed, and a reader waiting for it (watch.WaitCovers) must
// find the result readable when it returns.
func TestFrontierCoversAWindowOnlyOnceItsFinalResultIsReadable(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "frontier-window")
	t0 := windowBase()
	produceAt(t, in, 0, "k", t0+1000, t0+9000, t0+12000)
	app, _ := runApp(t, windowApp(t, appID, in, out), processor.WithStateDir(t.TempDir()), processor.WithHTTP("127.0.0.1:0"))
	base := baseURL(t, app)

	w, err := watch.New(kafkatest.Brokers(t), appID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		waited <- w.WaitCovers(ctx, out, time.UnixMilli(t0+9999))
	}()

	// Stream time 12 s: the three records are committed, [0, 10 s) is not
	// final, and nothing claims it is.
	waitConsumed(t, appID, in, 3)
	for range 5 {
		if covers(t, base, out, t0+9999) {
			t.Fatalf("/frontier covers %d at stream time %d: the final result of [%d, %d) does not exist yet", t0+9999, t0+12000, t0, t0+10000)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitCovers returned (%v) before the window closed", err)
	default:
	}
	if recs := kafkatest.ConsumeExactly(t, out, 0, 5*time.Second, time.Second); len(recs) != 0 {
		t.Fatalf("outputs before the window closed: %s", kafkatest.Summary(recs, 5))
	}

	// Stream time 15 s closes it: covered from the commit that makes the
	// result visible, and not a moment before the result is readable.
	produceAt(t, in, 0, "k", t0+15000)
	deadline := time.Now().Add(30 * time.Second)
	for !covers(t, base, out, t0+9999) {
		if time.Now().After(deadline) {
			t.Fatal("/frontier never covered the closed window")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lso := kafkatest.StableEnds(t, out)[0]; lso == 0 {
		t.Fatalf("/frontier covers %d while nothing on %s is committed (last stable offset 0)", t0+9999, out)
	}
	recs := kafkatest.ConsumeExactly(t, out, 1, 30*time.Second, 500*time.Millisecond)
	if n, ok := finalCount(recs, "k", t0); !ok || n != 2 {
		t.Fatalf("/frontier covers %d but the committed output is %s, want the final count 2 of [%d, %d)", t0+9999, kafkatest.Summary(recs, 5), t0, t0+10000)
	}
	if covers(t, base, out, t0+10000) {
		t.Fatalf("/frontier covers %d: [%d, %d) is open", t0+10000, t0+10000, t0+20000)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("WaitCovers: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitCovers did not return once the window was covered")
	}
	if lso := kafkatest.StableEnds(t, out)[0]; lso == 0 {
		t.Fatalf("WaitCovers returned while nothing on %s is committed (last stable offset 0)", out)
	}
	recs = kafkatest.ConsumeExactly(t, out, 1, 30*time.Second, 200*time.Millisecond)
	if _, ok := finalCount(recs, "k", t0); !ok {
		t.Fatalf("after WaitCovers the final result is not readable: %s", kafkatest.Summary(recs, 5))
	}
	st, ok := w.Frontier(out)
	if !ok || st.WatermarkMs != t0+9999 || len(st.Tasks) != 1 {
		t.Fatalf("watcher's frontier %+v, want watermark %d from the one task", st, t0+9999)
	}
}

// frontierHistory reads every committed record of the app's frontier
// topic, in order (compaction has not run on the active segment).
func frontierHistory(t *testing.T, app string, until func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	return kafkatest.ConsumeUntil(t, app+"-frontier", time.Minute, until)
}

// checkMonotone folds the history into a View record by record and fails
// if the sink's watermark, any task's greatest mark, or any partition's
// offset ever goes back; and if a key's own marks or offsets do.
func checkMonotone(t *testing.T, hist []*kgo.Record, sink string) frontier.SinkStatus {
	t.Helper()
	v := frontier.NewView()
	last := frontier.SinkStatus{WatermarkMs: frontier.NoWatermark}
	byKey := map[string]frontier.Record{}
	for _, r := range hist {
		if err := v.Apply(r.Key, r.Value); err != nil {
			t.Fatalf("offset %d: %v", r.Offset, err)
		}
		if r.Value != nil {
			var rec frontier.Record
			_ = rec.UnmarshalBinary(r.Value)
			if prev, ok := byKey[string(r.Key)]; ok {
				for _, m := range prev.Tasks {
					if now, ok := rec.Mark(m.TaskRef); !ok || now.WatermarkMs < m.WatermarkMs {
						t.Fatalf("offset %d: key %s: task %s's mark went from %d to %+v", r.Offset, r.Key, m.TaskRef, m.WatermarkMs, now)
					}
				}
				for p, off := range prev.Offsets {
					if p >= len(rec.Offsets) || rec.Offsets[p] < off {
						t.Fatalf("offset %d: key %s: partition %d's offset went back from %d: %v", r.Offset, r.Key, p, off, rec.Offsets)
					}
				}
			}
			byKey[string(r.Key)] = rec
		}
		st, ok := v.Sink(sink)
		if !ok {
			continue
		}
		if st.WatermarkMs < last.WatermarkMs {
			t.Fatalf("offset %d (%s): the sink watermark went back from %d to %d", r.Offset, r.Key, last.WatermarkMs, st.WatermarkMs)
		}
		marks := map[frontier.TaskRef]int64{}
		for _, m := range st.Tasks {
			marks[m.TaskRef] = m.WatermarkMs
		}
		for _, m := range last.Tasks {
			if marks[m.TaskRef] < m.WatermarkMs {
				t.Fatalf("offset %d (%s): task %s went back from %d to %d", r.Offset, r.Key, m.TaskRef, m.WatermarkMs, marks[m.TaskRef])
			}
		}
		for p, m := range last.Partitions {
			if p >= len(st.Partitions) || st.Partitions[p].Offset < m.Offset {
				t.Fatalf("offset %d (%s): partition %d went back from %d", r.Offset, r.Key, p, m.Offset)
			}
		}
		last = st
	}
	return last
}

func statelessApp(t *testing.T, app, in, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app)
	b.Stream(in, serde.String(), serde.String()).MapValues(func(_, v string) string { return strings.ToUpper(v) }).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestFrontierNeverGoesBackAcrossRestarts: a restarted instance, and a new
// instance taking over from a departed one, read the frontier topic back
// and never publish less than was published, for any task or partition;
// the old instance's record is then cleaned up with its claims absorbed.
func TestFrontierNeverGoesBackAcrossRestarts(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "frontier-restart")
	t0 := windowBase()
	produceAt(t, in, 0, "a", t0+1000, t0+8000)
	produceAt(t, in, 1, "b", t0+2000, t0+9000)
	dir := t.TempDir()
	app, stop := runApp(t, statelessApp(t, appID, in, out), processor.WithStateDir(dir), processor.WithInstanceID("first"), processor.WithHTTP("127.0.0.1:0"))
	base := baseURL(t, app)
	for i := 0; !processor.FrontierWired(app); i++ {
		if i == 100 {
			t.Skip("App.Run does not start the frontier service or the record loop does not call frontierTick yet (see app_frontier.go)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !covers(t, base, out, t0+8000) {
		if time.Now().After(deadline) {
			t.Fatal("the first run never covered its inputs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()

	// Restarted with the same id: a record older than what was covered
	// arrives (late), and the other partition gets nothing.
	produceAt(t, in, 0, "a", t0+3000)
	_, stop = runApp(t, statelessApp(t, appID, in, out), processor.WithStateDir(dir), processor.WithInstanceID("first"))
	waitConsumed(t, appID, in, 3)
	stop()

	// A new instance with its own id and state, while "first" is gone.
	// Partition 1 keeps receiving records, partition 0 none: task 0_0 goes
	// idle and follows 0_1, beyond what its own (restored) clock gives.
	secondDir := t.TempDir()
	app, stop = runApp(t, statelessApp(t, appID, in, out), processor.WithStateDir(secondDir), processor.WithInstanceID("second"), processor.WithHTTP("127.0.0.1:0"))
	feeding := make(chan struct{})
	fed := make(chan struct{})
	feeder := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	go func() {
		defer close(fed)
		for i := int64(0); ; i++ {
			select {
			case <-feeding:
				return
			case <-time.After(300 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = feeder.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: 1, Key: []byte("b"), Value: []byte("v"),
				Timestamp: time.UnixMilli(t0 + 20000 + 100*i)}).FirstErr()
			cancel()
		}
	}()
	firstKey, secondKey := out+"@first", out+"@second"
	task00 := frontier.TaskRef{SubTopology: 0, Partition: 0}
	followed, cleaned := false, false
	before := frontierHistory(t, appID, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if string(r.Key) == firstKey && r.Value == nil {
				cleaned = true // the departed instance's record is deleted
			}
			if string(r.Key) == secondKey && r.Value != nil {
				var rec frontier.Record
				_ = rec.UnmarshalBinary(r.Value)
				if m, ok := rec.Mark(task00); ok && m.Idle && m.WatermarkMs > t0+20000 {
					followed = true
				}
			}
		}
		return followed && cleaned
	})
	close(feeding)
	<-fed
	stop()

	// Restarted: 0_0 is not idle until its timeout passes again; the
	// restarted session still publishes at least the mark it followed to.
	app, _ = runApp(t, statelessApp(t, appID, in, out), processor.WithStateDir(secondDir), processor.WithInstanceID("second"), processor.WithHTTP("127.0.0.1:0"))
	base = baseURL(t, app)
	restartAt := before[len(before)-1].Offset
	hist := frontierHistory(t, appID, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if r.Offset > restartAt && string(r.Key) == secondKey && r.Value != nil {
				var rec frontier.Record
				_ = rec.UnmarshalBinary(r.Value)
				if m, ok := rec.Mark(task00); ok && !m.Idle {
					return true // the restarted session published 0_0, not yet idle
				}
			}
		}
		return false
	})
	st := checkMonotone(t, hist, out)
	if st.WatermarkMs < t0+8000 {
		t.Fatalf("sink watermark %d after the restarts, below the %d covered before", st.WatermarkMs, t0+8000)
	}
	if len(st.Keys) != 1 || st.Keys[0] != secondKey {
		t.Fatalf("records left: %v, want only second's", st.Keys)
	}
	if !covers(t, base, out, t0+8000) {
		t.Fatalf("the new instance's /frontier does not cover %d", t0+8000)
	}
	// first's last record's claims live on in second's record, written in
	// the transaction that deleted it.
	var firstLast, secondAt frontier.Record
	for i, r := range hist {
		switch {
		case string(r.Key) == firstKey && r.Value != nil:
			_ = firstLast.UnmarshalBinary(r.Value)
		case string(r.Key) == firstKey:
			for j := i - 1; j >= 0; j-- {
				if string(hist[j].Key) == secondKey {
					_ = secondAt.UnmarshalBinary(hist[j].Value)
					break
				}
			}
		}
	}
	for _, m := range firstLast.Tasks {
		if got, ok := secondAt.Mark(m.TaskRef); !ok || got.WatermarkMs < m.WatermarkMs {
			t.Fatalf("first's mark %+v was deleted without second covering it (second has %+v)", m, got)
		}
	}
}
