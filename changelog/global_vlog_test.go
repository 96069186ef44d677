package changelog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGlobalStoreDamagedValueLogIsReloaded: a value in a global store's
// value log (values of 1 KiB and more) damaged on disk. Badger's read of
// it returns an empty value without an error; the global store must not
// serve that: the damage is found when the store opens and the store
// starts empty for a full reload from its topic, and a read that meets
// damage anyway is ErrCorrupt, never an empty or wrong value.
func TestGlobalStoreDamagedValueLogIsReloaded(t *testing.T) {
	for _, c := range []struct {
		name     string
		file     func(logs []string) string
		noVerify bool // Options.NoVerifyChecksums: only the reads can tell
	}{
		{"in an older value log file", func(logs []string) string { return logs[0] }, false},
		{"in the last value log file", func(logs []string) string { return logs[len(logs)-1] }, false},
		{"not verified at open", func(logs []string) string { return logs[0] }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "g")
			opts := Options{MemoryBudget: 16 << 20, Logger: quietLog, valueLogFileSize: 1 << 20}
			g, _, err := OpenGlobalStore(dir, "g", "merchants", opts)
			if err != nil {
				t.Fatal(err)
			}
			big := strings.Repeat("a value too large for the LSM tree ", 100)
			const n = 800 // ~2.8 MB: three value log files
			var recs []GlobalRecord
			for i := range n {
				recs = append(recs, GlobalRecord{Key: fmt.Appendf(nil, "key-%03d", i), Value: fmt.Appendf(nil, "%03d %s", i, big)})
				if i%100 == 99 {
					if err := g.Apply(recs, map[int32]int64{0: int64(i + 1)}); err != nil {
						t.Fatal(err)
					}
					recs = recs[:0]
				}
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
			slices.Sort(logs)
			if len(logs) < 2 {
				t.Fatalf("%d value log files, want several", len(logs))
			}
			path := c.file(logs)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(data[len(data)/4:], []byte(big))
			if i < 0 {
				t.Fatalf("no value in %s", path)
			}
			flipByte(t, path, int64(len(data)/4+i+len(big)/2))

			opts.NoVerifyChecksums = c.noVerify
			g, reload, err := OpenGlobalStore(dir, "g", "merchants", opts)
			if err != nil {
				t.Fatalf("open the damaged global store: %v", err)
			}
			defer g.Close()
			t.Logf("reload %q, position %v", reload, g.Position())
			if reload == "" && !c.noVerify {
				t.Errorf("the damaged value log was not found at open: no reload, position %v", g.Position())
			}
			var corrupt int
			for i := range n {
				v, found, err := g.Get(fmt.Appendf(nil, "key-%03d", i))
				switch {
				case IsCorrupt(err):
					corrupt++
				case err != nil:
					t.Fatalf("Get: %v, want nil or ErrCorrupt", err)
				case found && string(v) != fmt.Sprintf("%03d %s", i, big):
					t.Fatalf("key-%03d: a damaged value was served: %.40q", i, v)
				}
			}
			if c.noVerify {
				if corrupt == 0 {
					t.Error("no Get found the damaged value")
				}
				if err := g.Range(nil, nil, func([]byte, []byte) bool { return true }); !IsCorrupt(err) {
					t.Errorf("Range over the damaged value = %v, want ErrCorrupt", err)
				}
			}
		})
	}
}
