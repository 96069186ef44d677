package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionPrintsVersionAndGoRuntime(t *testing.T) {
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"version"})
	defer rootCmd.SetArgs(nil)
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "tidemark dev (go") {
		t.Fatalf("version printed %q, want \"tidemark dev (go...)\"", got)
	}
}
