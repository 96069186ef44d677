package changelog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Listing snapshot chains while another instance prunes them: objects
// vanish between the file:// driver's directory read and its stat of each
// entry, or between a listing and the read of a manifest it named. No
// listing may fail for that; a chain deleted meanwhile is absent or
// incomplete (CI saw "list snapshot chains of task 0_1: blob
// (code=NotFound): lstat …/00000001.backup").
func TestSnapshotListingSurvivesConcurrentPrune(t *testing.T) {
	dir := t.TempDir()
	ss, err := OpenSnapshotStore(context.Background(), "file://"+dir, "app", SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	const chains, perChain = 150, 4
	for c := range chains {
		chainDir := filepath.Join(dir, "app", snapTask, fmt.Sprintf("c%020d", c))
		if err := os.MkdirAll(chainDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for seq := range perChain {
			for _, suffix := range []string{"backup", "manifest.json"} {
				body := []byte("backup bytes")
				if suffix == "manifest.json" {
					body = fmt.Appendf(nil, `{"seq": %d}`, seq)
				}
				if err := os.WriteFile(filepath.Join(chainDir, fmt.Sprintf("%08d.%s", seq, suffix)), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ctx := context.Background()
	pruned := make(chan error, 1)
	go func() {
		for c := range chains - 1 { // the newest stays
			if err := ss.deleteChain(ctx, snapTask, fmt.Sprintf("c%020d", c)); err != nil {
				pruned <- err
				return
			}
		}
		pruned <- nil
	}()
	for done := false; !done; {
		select {
		case err := <-pruned:
			if err != nil {
				t.Fatalf("prune: %v", err)
			}
			done = true
		default:
		}
		got, err := ss.Chains(ctx, snapTask)
		if err != nil {
			t.Fatalf("list chains during a prune: %v", err)
		}
		for _, c := range got[:min(len(got), 3)] { // the ones being deleted
			if _, err := ss.Manifests(ctx, snapTask, c); err != nil {
				t.Fatalf("list manifests of chain %s during a prune: %v", c, err)
			}
		}
	}
	got, err := ss.Chains(ctx, snapTask)
	if err != nil || len(got) != 1 {
		t.Fatalf("after the prune: chains %v (%v), want the newest only", got, err)
	}
	if ms, err := ss.Manifests(ctx, snapTask, got[0]); err != nil || len(ms) != perChain {
		t.Fatalf("the newest chain's manifests: %d (%v), want %d", len(ms), err, perChain)
	}
}
