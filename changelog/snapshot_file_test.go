package changelog

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSnapshotFileStoreKeepsTemporaryFilesInside: a file:// store writes
// its temporary files next to its objects, never in os.TempDir. The
// driver's default writes them to os.TempDir and renames them into the
// store: with /tmp on another file system (a tmpfs /tmp, a store on a
// mounted volume) that rename fails and no snapshot is ever written, and a
// process killed mid-write leaves its temporary file behind in /tmp. Where
// /dev/shm is another file system than the store, TMPDIR points there, so
// the old behaviour fails with "invalid cross-device link"; elsewhere the
// check is that TMPDIR is left without temporary files.
func TestSnapshotFileStoreKeepsTemporaryFilesInside(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "tidemark-snap-tmp-"); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(shm) })
		if device(t, shm) != device(t, dir) {
			tmp = shm
		}
	}
	t.Logf("TMPDIR %s, store %s", tmp, dir)
	t.Setenv("TMPDIR", tmp)
	ss, err := OpenSnapshotStore(context.Background(), "file://"+filepath.Join(dir, "snaps"), "app", SnapshotOptions{ChainLength: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	h := newSnapHarness(t, ss, Options{})
	for range 3 { // a full backup, an incremental one, a new chain
		h.commit()
		h.snapshot()
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left in TMPDIR: %v", left)
	}
	var inStore []string
	_ = filepath.Walk(filepath.Join(dir, "snaps"), func(p string, _ os.FileInfo, err error) error {
		if err == nil && filepath.Ext(p) == ".tmp" {
			inStore = append(inStore, p)
		}
		return nil
	})
	if len(inStore) > 0 {
		t.Errorf("temporary files left in the store after complete writes: %v", inStore)
	}
	load, got, _, _ := loadFresh(t, ss)
	if !load.Loaded {
		t.Fatalf("nothing loaded: %+v", load)
	}
	equalMaps(t, "loaded", got, h.model)
}

// device is the file system p is on.
func device(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev)
}
