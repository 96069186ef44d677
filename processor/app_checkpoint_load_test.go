package processor_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestCheckpointsAndSnapshotsWhileInputFlows: with input arriving without
// pause and the default (pipelined) commits, a transaction is open at
// nearly every turn of the record loop. Checkpoints, and the snapshots
// written after them, must still happen at the scheduler's interval, not
// only once the input goes quiet: a service under steady load otherwise
// never snapshots (a task moving to a fresh instance replays its whole
// changelog) and never syncs Badger (a crash replays everything since
// start, past the RestoreTarget cap).
func TestCheckpointsAndSnapshotsWhileInputFlows(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	appID := kafkatest.UniqueName(t, "app")
	topo := countTopology(t, appID, in, out)
	url := "file://" + t.TempDir()
	ss, err := changelog.OpenSnapshotStore(context.Background(), url, appID, changelog.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()

	// Input without pause: a few records every few milliseconds to both
	// partitions, until the test is done looking.
	cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	pctx, pcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var produceErr error
	var produced atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; pctx.Err() == nil; n += 4 {
			var recs []*kgo.Record
			for i := n; i < n+4; i++ {
				k := fmt.Sprintf("sku-%03d", i%500)
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte(strconv.Itoa(i)),
					Partition: processor.DefaultPartition([]byte(k), 2)})
			}
			if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
				if pctx.Err() == nil {
					produceErr = err
				}
				return
			}
			produced.Add(int64(len(recs)))
			select {
			case <-pctx.Done():
			case <-time.After(3 * time.Millisecond):
			}
		}
	}()
	stopInput := func() {
		pcancel()
		wg.Wait()
		if produceErr != nil {
			t.Fatalf("produce: %v", produceErr)
		}
	}
	defer stopInput()

	app, stop := runApp(t, topo, processor.WithSnapshotStore(url), fastCheckpoints, processor.WithHTTP("127.0.0.1:0"))
	defer stop()
	// Both tasks snapshotted while the input flows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		snapshotted := 0
		for p := range 2 {
			chains, err := ss.Chains(context.Background(), fmt.Sprintf("0_%d", p))
			if err != nil {
				t.Fatal(err)
			}
			if len(chains) > 0 {
				snapshotted++
			}
		}
		if snapshotted == 2 && app.HTTPAddr() != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s of steady input: %d of 2 tasks snapshotted", snapshotted)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Then a window of steady input: checkpoints are due every 300 ms at
	// the latest (about 33 in 10 s); the old loop took 2, at turns that
	// happened to find no transaction open. Ask for a third of the due
	// ones, so a slow machine does not fail the test.
	const window = 10 * time.Second
	m0, p0 := scrape(t, "http://"+app.HTTPAddr()), produced.Load()
	time.Sleep(window)
	m1, p1 := scrape(t, "http://"+app.HTTPAddr()), produced.Load()
	ckpts := m1["tidemark_checkpoints_total"] - m0["tidemark_checkpoints_total"]
	snaps := m1["tidemark_snapshot_seconds_count"] - m0["tidemark_snapshot_seconds_count"]
	commits := m1["tidemark_commits_total"] - m0["tidemark_commits_total"]
	t.Logf("over %s of steady input (%d records): %v checkpoints, %v snapshots, %v commits", window, p1-p0, ckpts, snaps, commits)
	if pctx.Err() != nil || p1-p0 < 1000 {
		t.Fatalf("the input did not flow through the window: %d records produced", p1-p0)
	}
	if ckpts < 10 || snaps < 10 {
		t.Fatalf("over %s of steady input with checkpoints due every 300ms: %v checkpoints and %v snapshots, want at least 10 of each", window, ckpts, snaps)
	}
}
