package bench_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/bench"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// TestFailoverMeasuresTidemark runs the failover measurement end to end on
// the real broker with a small table: two tidemark worker processes, the
// owner of partition 0 SIGKILLed, the survivor restoring the moved
// partitions from their changelogs. The times must add up and respect the
// session timeout: without the peer detector the group cannot reassign
// before the killed member's session has expired.
func TestFailoverMeasuresTidemark(t *testing.T) {
	failoverMeasures(t, bench.FailoverCase{Name: "tidemark-restore-nodetect", Kind: "tidemark", NoPeerDetector: true})
}

// TestFailoverWithPeerDetectorBeatsTheSessionTimeout is the same with the
// members serving HTTP: the survivor's peer detector removes the killed
// member from the group, so the partitions move before its session could
// have expired.
func TestFailoverWithPeerDetectorBeatsTheSessionTimeout(t *testing.T) {
	failoverMeasures(t, bench.FailoverCase{Name: "tidemark-restore", Kind: "tidemark"})
}

func failoverMeasures(t *testing.T, c bench.FailoverCase) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Without the peer detector the victim leaves the group by its session
	// expiry, which the test checks; with it, a long session leaves a wide
	// gap between the detector's removal (about a second, more on a loaded
	// machine) and the expiry it must beat.
	session := 6 * time.Second
	if !c.NoPeerDetector {
		session = 20 * time.Second
	}
	rep, err := bench.RunFailover(ctx, bench.FailoverOptions{
		Brokers:        brokers,
		Cases:          []bench.FailoverCase{c},
		Keys:           20_000,
		Rate:           500,
		SessionTimeout: session,
		Steady:         4 * time.Second,
		SettleMax:      10 * time.Second,
		After:          time.Second,
		Timeout:        60 * time.Second,
		WorkDir:        t.TempDir(),
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	logReport(t, md.String())
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	if !slices.Contains(r.Moved, 0) || len(r.Moved) == 4 {
		t.Errorf("moved partitions %v: want partition 0 and not all four", r.Moved)
	}
	// The victim's last heartbeat was at most one heartbeat interval
	// (session/3) before the kill: its session cannot expire sooner.
	lo := (session - session/3).Seconds()
	switch {
	case r.ReassignedSec < r.ExpiredSec:
		t.Errorf("reassigned after %.2f s, before the victim left the group (%.2f s)", r.ReassignedSec, r.ExpiredSec)
	case c.NoPeerDetector && r.ExpiredSec < lo:
		t.Errorf("victim out of the group after %.2f s without the peer detector: want its session expiry, ≥ %.1f s", r.ExpiredSec, lo)
	case !c.NoPeerDetector && r.ReassignedSec >= lo:
		t.Errorf("reassigned after %.2f s with the peer detector: want it before the victim's session could expire (%.1f s)", r.ReassignedSec, lo)
	}
	if r.TakeoverSec <= 0 || r.TakeoverSec > 30 {
		t.Errorf("takeover %.2f s, want in (0, 30]", r.TakeoverSec)
	}
	if d := r.TotalSec - r.ReassignedSec - r.TakeoverSec; d < -0.001 || d > 0.001 {
		t.Errorf("total %.3f s ≠ reassigned %.3f s + takeover %.3f s", r.TotalSec, r.ReassignedSec, r.TakeoverSec)
	}
	// Without standby or snapshot the survivor replays the moved
	// partitions' whole changelogs: at least their share of the table.
	if want := int64(len(r.Moved)) * 20_000 / 4 * 9 / 10; r.RestoredRecords < want || r.Snapshots != 0 {
		t.Errorf("survivor restored %d changelog records and loaded %d snapshots, want ≥ %d records and no snapshot", r.RestoredRecords, r.Snapshots, want)
	}
	if r.SteadyCount == 0 || r.TakeoverCount == 0 || r.SteadyP99 <= 0 || r.TakeoverP99 <= 0 {
		t.Errorf("unmoved partitions' staleness not measured: %+v", r)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "results.md"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
}

// TestFailoverStandbyAndSnapshot runs cases (a) and (b) on a small table:
// the survivor must take the moved partitions over from its standby (no
// snapshot, at most the tail restored) and from the snapshot store (a
// snapshot of each moved task loaded, then the tail), never replaying the
// whole changelogs. The tail is what the victim wrote after the
// standby's last read or after the last snapshot: bounded by a tenth of
// the moved table here.
func TestFailoverStandbyAndSnapshot(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const keys = 20_000
	rep, err := bench.RunFailover(ctx, bench.FailoverOptions{
		Brokers: brokers,
		Cases: []bench.FailoverCase{
			{Name: "tidemark-standby", Kind: "tidemark", Standby: 1},
			{Name: "tidemark-snapshot", Kind: "tidemark", Snapshot: true},
		},
		Keys:             keys,
		Rate:             500,
		Steady:           4 * time.Second,
		SettleMax:        10 * time.Second,
		After:            time.Second,
		SnapshotInterval: 2 * time.Second,
		Timeout:          60 * time.Second,
		WorkDir:          t.TempDir(),
	}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	logReport(t, md.String())
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Case, r.Error)
			continue
		}
		// A snapshot's restore replays the changelog tail since it: a
		// few seconds of input at 500 records/s on a loaded machine
		// (1095 of 10000 seen), far from the whole table.
		table := int64(len(r.Moved)) * keys / 4
		if r.RestoredRecords > table/3 {
			t.Errorf("%s: survivor restored %d changelog records of a moved table of %d keys: a full replay", r.Case, r.RestoredRecords, table)
		}
		if r.Snapshot && r.Snapshots < len(r.Moved) {
			t.Errorf("%s: %d snapshots loaded for moved partitions %v", r.Case, r.Snapshots, r.Moved)
		}
		if !r.Snapshot && r.Snapshots != 0 {
			t.Errorf("%s: %d snapshots loaded without a snapshot store", r.Case, r.Snapshots)
		}
		if r.TakeoverSec <= 0 {
			t.Errorf("%s: takeover %.2f s", r.Case, r.TakeoverSec)
		}
	}
}
