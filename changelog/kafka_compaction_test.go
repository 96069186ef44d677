package changelog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// readChangelog returns every committed record of partition 0 up to the
// high watermark, keyed by store key: the value, or "<tombstone>".
func readChangelog(t *testing.T, e *kafkaEnv) (records int, latest map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	cl := kafkatest.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	ends, err := kafkatest.Admin(t).ListEndOffsets(ctx, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	hwm, _ := ends.Lookup(e.topic, 0)
	latest = map[string][]string{}
	for pos := int64(0); pos < hwm.Offset; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read changelog: stuck at %d of %d", pos, hwm.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			records++
			v := string(r.Value)
			if r.Value == nil {
				v = "<tombstone>"
			}
			latest[string(r.Key[1:])] = append(latest[string(r.Key[1:])], v)
		})
	}
	return records, latest
}

// A restore from local state older than delete.retention.ms must rebuild:
// the tombstone of a key it holds may be compacted away, and replaying the
// tail would keep the deleted key forever.
func TestKafkaRestoreFromACompactedChangelogWithTombstones(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true, ChangelogConfig: map[string]string{
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "100",
	}}, 1)
	oldDir := t.TempDir()
	a := e.start(oldDir)
	mustPut(t, a.kv, "x", "1", "y", "1")
	a.commit()
	a.stop()

	b := e.start(t.TempDir())
	mustPut(t, b.kv, "x", "<del>")
	b.commit()
	for i := range 5 {
		mustPut(t, b.kv, "y", fmt.Sprint(i+2), "z", "3")
		b.commit()
	}
	// Keep writing so segments roll and the cleaner compacts them, until
	// x has vanished from the changelog: value and tombstone both.
	deadline := time.Now().Add(90 * time.Second)
	var total int
	for i := 0; ; i++ {
		time.Sleep(300 * time.Millisecond)
		mustPut(t, b.kv, "roll", fmt.Sprint(i))
		b.commit()
		n, latest := readChangelog(t, e)
		total = n
		if _, ok := latest["x"]; !ok && len(latest["y"]) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not compact the changelog within 90s; x has %q, y has %q", latest["x"], latest["y"])
		}
	}
	t.Logf("compacted changelog holds %d records", total)
	want := contents(t, b.kv)
	if _, ok := want["x"]; ok || want["y"] != "6" || want["z"] != "3" {
		t.Fatalf("live state %q", want)
	}
	b.stop()

	fresh := e.start(t.TempDir())
	equalMaps(t, "fresh restore of the compacted changelog", contents(t, fresh.kv), want)

	old := e.start(oldDir)
	if len(old.res.Rebuilt) != 1 {
		t.Fatalf("restore of state older than delete.retention.ms rebuilt %v, want a rebuild", old.res.Rebuilt)
	}
	equalMaps(t, "restore of old local state", contents(t, old.kv), want)
}
