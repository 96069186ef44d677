package changelog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestoreSaysWhenItMerges: once a sorted rebuild has read its
// changelog it merges its runs into the task DB, which takes seconds for
// large state. Progress used to stay at the last value it reported while
// reading (tidemark_restore_remaining_records stuck at e.g. 421,815) and
// no progress line was logged, so the restore looked hung. Progress must
// report the merge (nothing left to read, phase "merging") and the log
// must say it is merging.
func TestRestoreSaysWhenItMerges(t *testing.T) {
	spec := store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}
	e := newKafkaEnv(t, spec, 1)
	n := e.start(t.TempDir())
	for i := range 2000 {
		if err := n.kv.Put([]byte(fmt.Sprintf("sku-%05d", i)), bytes.Repeat([]byte("v"), 100)); err != nil {
			t.Fatal(err)
		}
	}
	n.commit()

	var logs testlog.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	db, err := OpenDB(t.TempDir(), Options{Logger: log, RestoreModeMinOffsets: 1, rebuildRunBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	task := db.NewTaskState(TaskStateConfig{AppID: e.app, Partition: 0, Producer: prod})
	if _, err := task.Open(spec, 0); err != nil {
		t.Fatal(err)
	}
	var seen []RestoreProgress
	opts := e.restoreOpts()
	opts.Logger = log
	// Only the forced reports: the merge of a test's state is too quick
	// for a timed one.
	opts.ProgressInterval = time.Hour
	opts.Progress = func(p RestoreProgress) { seen = append(seen, p) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := task.Restore(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if task.tdb.rebuilds != 1 {
		t.Fatalf("%d sorted rebuilds, want 1", task.tdb.rebuilds)
	}
	merging := -1
	for i, p := range seen {
		if p.Phase == RestorePhaseMerging && p.Remaining == 0 && p.Restored == 2000 && !p.Done {
			merging = i
			break
		}
	}
	if merging < 0 || merging == len(seen)-1 || !seen[len(seen)-1].Done {
		t.Fatalf("progress %+v; want a report of the merge (phase %q, 0 remaining, 2000 restored) before the last, done, one", seen, RestorePhaseMerging)
	}
	if !strings.Contains(logs.String(), "phase=merging") {
		t.Fatalf("no log line says the restore is merging:\n%s", logs.String())
	}
}
