package changelog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestGlobalStoreDamagedStateIsReloaded: a global store's Badger directory
// damaged on disk (a flipped byte in a table, the MANIFEST gone after a
// crash) must be reloaded from its topic, never served: the store either
// holds exactly what its recorded position reflects, or starts empty with
// a full reload.
func TestGlobalStoreDamagedStateIsReloaded(t *testing.T) {
	const commits = 4
	build := func(t *testing.T) (crashed string) {
		dir := filepath.Join(t.TempDir(), "g")
		for c := 1; c <= commits; c++ {
			g, _ := openGlobalForTest(t, dir, "merchants")
			var recs []GlobalRecord
			for i := range 100 {
				recs = append(recs, GlobalRecord{Key: fmt.Appendf(nil, "key-%03d", i), Value: fmt.Appendf(nil, "commit %d", c)})
			}
			if err := g.Apply(recs, map[int32]int64{0: int64(c)}); err != nil {
				t.Fatal(err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		}
		g, _ := openGlobalForTest(t, dir, "merchants")
		if err := g.Apply([]GlobalRecord{{Key: []byte("key-000"), Value: fmt.Appendf(nil, "commit %d", commits+1)}},
			map[int32]int64{0: commits + 1}); err != nil {
			t.Fatal(err)
		}
		crashed = filepath.Join(t.TempDir(), "crashed")
		if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		return crashed
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"bytes flipped in a table's blocks", func(t *testing.T, dir string) {
			for _, path := range tableFiles(t, dir) {
				for _, b := range tableBlocks(t, path) {
					flipByte(t, path, int64(b.off+b.len/2))
				}
			}
		}},
		{"the footer of a table overwritten", func(t *testing.T, dir string) {
			path := tableFiles(t, dir)[0]
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			overwrite(t, path, fi.Size()-8, bytes.Repeat([]byte{0xa5}, 8))
		}},
		{"the MANIFEST deleted", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := build(t)
			c.damage(t, dir)
			g, reload, err := OpenGlobalStore(dir, "g", "merchants", Options{MemoryBudget: 16 << 20, Logger: quietLog})
			if err != nil {
				t.Fatalf("open damaged global store: %v", err)
			}
			defer g.Close()
			got := map[string]string{}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("reading the damaged global store panicked: %v", r)
					}
				}()
				err = g.Range(nil, nil, func(k, v []byte) bool { got[string(k)] = string(v); return true })
			}()
			pos := g.Position()[0]
			t.Logf("reload %q, position %d, %d keys", reload, pos, len(got))
			want := map[string]string{}
			if reload == "" && pos > 0 {
				for i := range 100 {
					want[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("commit %d", min(pos, commits))
				}
				want["key-000"] = fmt.Sprintf("commit %d", pos)
			}
			var wrong []string
			for k, v := range want {
				if got[k] != v {
					wrong = append(wrong, fmt.Sprintf("%s=%q", k, got[k]))
				}
			}
			if err != nil || len(wrong) > 0 || len(got) != len(want) {
				t.Fatalf("reload %q, position %d: %d keys, %d not what the position reflects (%v ...), read error %v",
					reload, pos, len(got), len(wrong), wrong[:min(3, len(wrong))], err)
			}
		})
	}
}
