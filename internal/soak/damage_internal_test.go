package soak

import (
	"bytes"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamageChangesTheFileItNames: every damage the kill campaign reports
// was done to the file it names, in a task DB (never one already moved
// aside); a write-ahead log is only ever the newest one, as a crash tears
// it; a snapshot is one in the fleet's store; a state directory without
// task DBs is left alone.
func TestDamageChangesTheFileItNames(t *testing.T) {
	seed := RandomSeed()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))

	dir := t.TempDir()
	f := NewFleet(ServiceConfig{Dir: dir, SnapshotStore: "file://" + filepath.Join(dir, "snapshots")}, t.Logf)
	state := f.instance("i1").StateDir
	if what, err := f.Damage("i1", rng); err != nil || what != "" {
		t.Fatalf("Damage of an instance without state = %q, %v; want nothing done", what, err)
	}
	files := map[string]string{
		"STATE":                        `{"format":2}`,
		"tasks/0_0/MANIFEST":           "manifest bytes",
		"tasks/0_0/000001.sst":         strings.Repeat("table one ", 40),
		"tasks/0_0/000002.sst":         strings.Repeat("table two ", 40),
		"tasks/0_0/00001.mem":          strings.Repeat("older log ", 40),
		"tasks/0_0/00002.mem":          strings.Repeat("newest log ", 40),
		"tasks/0_0/000001.vlog":        strings.Repeat("values ", 40),
		"tasks/0_1.corrupt-x/0.sst":    "moved aside already",
		"tasks/0_1.corrupt-x/MANIFEST": "moved aside already",
	}
	snapshot := filepath.Join("app", "0_0", "chain", "00000001.backup")
	seen := map[string]bool{}
	for range 200 {
		snapPath := filepath.Join(dir, "snapshots", snapshot)
		if err := os.MkdirAll(filepath.Dir(snapPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(snapPath, []byte(strings.Repeat("backup ", 40)), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			path := filepath.Join(state, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		what, err := f.Damage("i1", rng)
		if err != nil {
			t.Fatal(err)
		}
		kind, rel, ok := strings.Cut(strings.TrimSuffix(what, ")"), " (")
		if !ok {
			t.Fatalf("Damage = %q, want \"<damage> (<file>)\"", what)
		}
		seen[kind] = true
		if strings.Contains(rel, ".corrupt-") {
			t.Fatalf("Damage = %q: damaged state already moved aside", what)
		}
		if strings.HasSuffix(rel, ".mem") && rel != filepath.Join("tasks", "0_0", "00002.mem") {
			t.Fatalf("Damage = %q: only the newest write-ahead log can be torn", what)
		}
		path, before := filepath.Join(state, rel), files[rel]
		if kind == "snapshot bytes flipped" {
			if rel != snapshot {
				t.Fatalf("Damage = %q, want the snapshot %s", what, snapshot)
			}
			path, before = filepath.Join(dir, "snapshots", rel), strings.Repeat("backup ", 40)
		}
		got, err := os.ReadFile(path)
		if err == nil && bytes.Equal(got, []byte(before)) {
			t.Fatalf("Damage = %q, but %s is unchanged", what, rel)
		}
		if err != nil && kind != "table deleted" {
			t.Fatalf("Damage = %q: %v", what, err)
		}
	}
	if len(seen) != len(damages) {
		t.Errorf("200 damages did %d kinds of damage, want all %d: %v", len(seen), len(damages), seen)
	}
}
