package changelog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// TestCommitWithTheDiskNearlyFullIsRefusedNamingStoreAndDir: with less
// free space than MinFreeDisk, Flush (a commit's prepare) fails with
// ErrNoSpace naming the stores and the state directory, before producing
// any changelog record, and the state keeps its committed contents: a
// commit that went on would hit the full disk inside Badger's memory maps
// (SIGBUS: the process dies with a runtime fault naming nothing).
func TestCommitWithTheDiskNearlyFullIsRefusedNamingStoreAndDir(t *testing.T) {
	free := int64(1 << 40)
	prev := freeDisk
	freeDisk = func(string) (int64, error) { return free, nil }
	t.Cleanup(func() { freeDisk = prev })

	db := openTestDB(t, Options{})
	p := &fakeProducer{}
	task := db.NewTaskState(TaskStateConfig{AppID: "shop", Partition: 1, Producer: p})
	s, err := task.Open(store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	kv := s.(store.KeyValue)
	mustPut(t, kv, "sku1", "5")
	offs, err := task.Flush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(offs); err != nil {
		t.Fatal(err)
	}

	free = 1 << 20 // below the default 64 MiB
	mustPut(t, kv, "sku1", "4")
	produced := len(p.records)
	_, err = task.Flush(context.Background())
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "stock") || !strings.Contains(err.Error(), db.dir) {
		t.Fatalf("Flush with 1 MiB free = %v, want ErrNoSpace naming the store stock and %s", err, db.dir)
	}
	if len(p.records) != produced {
		t.Fatalf("the refused commit produced %d changelog records", len(p.records)-produced)
	}
	task.Discard()
	equalMaps(t, "after the refused commit", contents(t, kv), map[string]string{"sku1": "5"})

	// A restore is refused the same way, before it writes.
	_, err = task.Restore(context.Background(), RestoreOptions{})
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("Restore with 1 MiB free = %v, want ErrNoSpace", err)
	}

	// MinFreeDisk < 0 turns the check off.
	off := openTestDB(t, Options{MinFreeDisk: -1})
	task = off.NewTaskState(TaskStateConfig{AppID: "shop", Partition: 1, Producer: &fakeProducer{}})
	if s, err = task.Open(store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s.(store.KeyValue), "sku1", "3")
	if _, err := task.Flush(context.Background()); err != nil {
		t.Fatalf("Flush with the check off: %v", err)
	}
}

// A global store's Apply is refused the same way, before it writes: its
// position stays where its data is.
func TestGlobalApplyWithTheDiskNearlyFullIsRefused(t *testing.T) {
	free := int64(1 << 40)
	prev := freeDisk
	freeDisk = func(string) (int64, error) { return free, nil }
	t.Cleanup(func() { freeDisk = prev })
	dir := t.TempDir() + "/g"
	g, _, err := OpenGlobalStore(dir, "merchants", "m", Options{MemoryBudget: 16 << 20, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Apply([]GlobalRecord{{Key: []byte("a"), Value: []byte("1")}}, map[int32]int64{0: 1}); err != nil {
		t.Fatal(err)
	}
	free = 1 << 20
	err = g.Apply([]GlobalRecord{{Key: []byte("a"), Value: []byte("2")}}, map[int32]int64{0: 2})
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "merchants") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Apply with 1 MiB free = %v, want ErrNoSpace naming merchants and %s", err, dir)
	}
	if v, _, _ := g.Get([]byte("a")); string(v) != "1" || g.Position()[0] != 1 {
		t.Fatalf("after the refused Apply: a=%q at position %v, want 1 at 1", v, g.Position())
	}
}
