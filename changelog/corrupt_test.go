package changelog

import (
	"os"
	"path/filepath"
	"testing"
)

// corrupt overwrites Badger's MANIFEST, the file that says which tables
// make up the DB.
func corrupt(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("garbage, not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
}
