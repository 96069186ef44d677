package changelog

import (
	"testing"
)

// TestSnapshotChainSurvivesAWipe: a store wiped for a rebuild (its
// changelog recreated, its offsets outside the log) loses its data through
// Badger's DropPrefix, which writes no delete markers. An incremental
// backup taken after the wipe, in a chain whose earlier backups hold the
// old data, would then bring every wiped key back when the chain loads.
// The wipe must end the chain: the loaded state is exactly what the store
// holds after it.
func TestSnapshotChainSurvivesAWipe(t *testing.T) {
	ss := memStore(t, SnapshotOptions{ChainLength: 10})
	h := newSnapHarness(t, ss, Options{})
	for range 5 {
		h.commit()
	}
	first := h.snapshot()
	if first.Manifest.Seq != 0 || len(h.model) == 0 {
		t.Fatalf("first snapshot seq %d with %d keys, want a full backup with keys", first.Manifest.Seq, len(h.model))
	}

	tp := TopicPartition{"app-counts-changelog", 3}
	if err := h.task.tdb.wipe(storeID("counts", 3), tp); err != nil {
		t.Fatal(err)
	}
	h.task.resetSnapshot()
	clear(h.model)
	if got := contents(t, h.kv); len(got) != 0 {
		t.Fatalf("after the wipe the store holds %d keys", len(got))
	}
	for range 3 {
		h.commit()
	}
	h.snapshot()

	load, got, _, _ := loadFresh(t, ss)
	if !load.Loaded {
		t.Fatalf("nothing loaded: %+v", load)
	}
	equalMaps(t, "loaded after a wipe", got, h.model)
}
