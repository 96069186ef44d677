package soak

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServiceLogReaders: the crash report and the campaign's counts read
// the service logs line by line: the tail, the lines naming a word, the
// last error, and how many sorted restores there were.
func TestServiceLogReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "i1.log")
	log := "level=INFO msg=\"task DB written sorted\" task=0_1\n" +
		"level=ERROR msg=boom err=\"first failure\"\n" +
		"level=INFO msg=\"task DB written sorted\" task=0_2\n" +
		"level=ERROR msg=\"run failed\" err=\"restore 0_3: broker gone\"\n" +
		"level=INFO msg=bye\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := countLines(path, sortedRestoreLog); got != 2 {
		t.Errorf("countLines = %d, want 2", got)
	}
	if got := tailLines(path, 2); got != "level=ERROR msg=\"run failed\" err=\"restore 0_3: broker gone\"\nlevel=INFO msg=bye" {
		t.Errorf("tailLines = %q", got)
	}
	if got := grepLines(path, 1, "ERROR"); len(got) != 1 || got[0] != "level=ERROR msg=\"run failed\" err=\"restore 0_3: broker gone\"" {
		t.Errorf("grepLines = %q, want the last ERROR line", got)
	}
	if got := lastError(path); got != "restore 0_3: broker gone" {
		t.Errorf("lastError = %q", got)
	}
	if got := countLines(filepath.Join(t.TempDir(), "missing.log"), sortedRestoreLog); got != 0 {
		t.Errorf("countLines of a missing file = %d", got)
	}
}
