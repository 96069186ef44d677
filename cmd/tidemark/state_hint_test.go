package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/changelog"
)

// 'tidemark state list --dir D' with D the --state-dir of 'tidemark run'
// (which keeps the state in D/<application>) says which --dir to give,
// and with that --dir it lists the stores.
func TestStateDirOfRunNamesTheApplicationSubdirectory(t *testing.T) {
	parent := t.TempDir()
	appDir := filepath.Join(parent, "shop")
	db, err := changelog.OpenDB(appDir, changelog.Options{Owner: changelog.Owner{Application: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	run := func(dir string) (string, error) {
		var out bytes.Buffer
		rootCmd.SetOut(&out)
		rootCmd.SetErr(&out)
		rootCmd.SetArgs([]string{"state", "list", "--dir", dir})
		defer func() { rootCmd.SetArgs(nil); rootCmd.SetOut(nil); rootCmd.SetErr(nil) }()
		err := rootCmd.Execute()
		return out.String(), err
	}
	_, err = run(parent)
	if err == nil {
		t.Fatalf("state list --dir %s (the run's --state-dir) succeeded, want an error", parent)
	}
	if !strings.Contains(err.Error(), "use --dir "+appDir) {
		t.Fatalf("state list --dir %s: %v; want it to name --dir %s", parent, err, appDir)
	}
	if out, err := run(appDir); err != nil {
		t.Fatalf("state list --dir %s: %v (%s)", appDir, err, out)
	}
	// A directory with no state below it keeps the plain error.
	empty := t.TempDir()
	if _, err := run(empty); err == nil || strings.Contains(err.Error(), "use --dir") {
		t.Fatalf("state list --dir %s (empty): %v; want the plain not-a-state-directory error", empty, err)
	}
}
