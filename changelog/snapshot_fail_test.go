package changelog

import (
	"context"
	"path/filepath"
	"testing"
)

// TestSnapshotFailureReleasesThePin: snapshots that keep failing (here
// the store is closed under them, as a full disk or an object store
// outage fails every write) must not keep the task DB's read pin past
// snapshotPinMaxAge (a young one is kept: a blip). The pin keeps
// Badger from discarding any version written since the last snapshot
// that succeeded, so a pin kept while the store stays unwritable made the
// task's state grow without bound. Once the store works again, the next
// snapshot starts a new chain with a full backup, and the newest chain
// loads the committed state.
func TestSnapshotFailureReleasesThePin(t *testing.T) {
	ctx := context.Background()
	url := "file://" + filepath.Join(t.TempDir(), "snaps")
	ss, err := OpenSnapshotStore(ctx, url, "app", SnapshotOptions{ChainLength: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := newSnapHarness(t, ss, Options{})
	h.commit()
	first := h.snapshot()
	h.commit()
	if res := h.snapshot(); res.Manifest.Seq != 1 || res.Manifest.Chain != first.Manifest.Chain {
		t.Fatalf("second snapshot %s/%d, want an incremental of chain %s", res.Manifest.Chain, res.Manifest.Seq, first.Manifest.Chain)
	}
	tdb := h.task.tdb
	pinned := func() bool {
		h.db.mu.Lock()
		st := tdb.snap
		h.db.mu.Unlock()
		if st == nil {
			return false
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.pin != nil
	}
	if !pinned() {
		t.Fatal("no pin after a snapshot: the test no longer sees the pin")
	}

	if err := ss.Close(); err != nil { // every write fails from now on
		t.Fatal(err)
	}
	// A blip: the chain's pin is young, and kept.
	h.commit()
	if _, err := h.db.WriteSnapshots(ctx, ss); err == nil {
		t.Fatal("WriteSnapshots to a closed store succeeded")
	}
	if !pinned() {
		t.Fatal("a failed snapshot released a young pin: a blip of the store would cost a full backup")
	}
	// The store stays down past the pin's age.
	old := snapshotPinMaxAge
	snapshotPinMaxAge = 0
	t.Cleanup(func() { snapshotPinMaxAge = old })
	for range 3 {
		h.commit()
		if _, err := h.db.WriteSnapshots(ctx, ss); err == nil {
			t.Fatal("WriteSnapshots to a closed store succeeded")
		}
		if pinned() {
			t.Fatal("the task DB still holds its snapshot pin after a failed snapshot: Badger keeps every version written since")
		}
	}

	ss2, err := OpenSnapshotStore(ctx, url, "app", SnapshotOptions{ChainLength: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ss2.Close()
	h.ss = ss2
	h.commit()
	res := h.snapshot()
	if res.Manifest.Seq != 0 || res.Manifest.Since != 0 || res.Manifest.Chain == first.Manifest.Chain {
		t.Fatalf("snapshot after the failures: chain %s seq %d since %d, want a new chain's full backup", res.Manifest.Chain, res.Manifest.Seq, res.Manifest.Since)
	}
	h.commit()
	if res := h.snapshot(); res.Manifest.Seq != 1 {
		t.Fatalf("next snapshot seq %d, want 1", res.Manifest.Seq)
	}
	load, got, _, _ := loadFresh(t, ss2)
	if !load.Loaded || len(load.Skipped) != 0 {
		t.Fatalf("load after the store came back: %+v", load)
	}
	equalMaps(t, "loaded", got, h.model)
}
