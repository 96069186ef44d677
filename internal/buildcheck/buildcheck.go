// Package buildcheck builds Go code the way a user of tidemark would: in a
// module of its own that requires tidemark (replaced by this checkout). Tests
// use it for what must compile (the README's examples) and for what must
// not (an operator option on the wrong operator).
package buildcheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const modulePath = "github.com/tidemark-streams/tidemark"

// RepoRoot is the directory of tidemark's go.mod, found by walking up from
// the working directory (a package directory under go test).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("buildcheck: no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

// Build writes files into a new module (see Module) and runs `go build`
// on all its packages with every type error reported. It returns the
// compiler's output; err is non-nil when the build failed.
func Build(t testing.TB, files map[string]string) (string, error) {
	t.Helper()
	return Go(t, Module(t, files), "build", "-gcflags=-e", "./...")
}

// Module writes files (path → content, relative to the module root) into a
// temporary module that requires tidemark from this checkout, and returns
// its directory. tidemark's go.sum verifies every dependency; go.mod files
// the module cache lacks come through GOPROXY (see Go).
func Module(t testing.TB, files map[string]string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := fmt.Sprintf("module tidemark.test/check\n\ngo 1.27\n\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n",
		modulePath, modulePath, root)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"go.mod": gomod, "go.sum": string(sum)}
	for name, content := range files {
		all[name] = content
	}
	for name, content := range all {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Go runs the go command with args in dir, a module from Module, and
// returns its combined output, with dir left out of file names.
func Go(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir = dir
	// -mod=mod lets the go command add the indirect requirements it finds
	// in tidemark's go.mod. The module graph of a module that requires
	// tidemark is not tidemark's own pruned graph: it can need go.mod files
	// of older versions that building tidemark never downloaded (a fresh
	// module cache lacked go-logr/logr v1.2.2's), so the go command may
	// fetch them through the environment's GOPROXY, as a user's would.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN="+runtime.Version(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return strings.ReplaceAll(string(out), dir+string(filepath.Separator), ""), err
}

// goCommand is the go command of the toolchain running the test, so the
// check compiles with the same Go version (generic methods need 1.27).
func goCommand() string {
	if root := runtime.GOROOT(); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
