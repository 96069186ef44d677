// Package doccheck holds tests that keep the README honest: its Go examples
// compile and pass as written, in a module of their own, as a new user
// would copy them.
package doccheck

import (
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/internal/buildcheck"
)

// firstServiceHeading starts the README section whose code must compile.
const firstServiceHeading = "## Your first service"

// readme returns README.md, or the file TIDEMARK_README names (to check a
// draft before it goes into the README).
func readme(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TIDEMARK_README")
	if path == "" {
		root, err := buildcheck.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, "README.md")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text from heading to the next heading of the same
// level.
func section(doc, heading string) (string, bool) {
	doc = "\n" + doc
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	body := doc[i+1+len(heading):]
	if j := strings.Index(body, "\n## "); j >= 0 {
		body = body[:j]
	}
	return body, true
}

var (
	goBlock  = regexp.MustCompile("(?s)\n```go\n(.*?)\n```")
	fileName = regexp.MustCompile(`^// ([\w.-]+\.go)\n`)
)

// goFiles returns the section's Go code blocks by file name: each block
// starts with a comment naming its file ("// main.go").
func goFiles(t *testing.T, body string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, m := range goBlock.FindAllStringSubmatch(body, -1) {
		code := m[1] + "\n"
		name := fileName.FindStringSubmatch(code)
		if name == nil {
			t.Fatalf("a Go block does not start with a comment naming its file (// main.go):\n%s", code)
		}
		if _, dup := files[name[1]]; dup {
			t.Fatalf("two Go blocks are %s", name[1])
		}
		if formatted, err := format.Source([]byte(code)); err != nil || string(formatted) != code {
			t.Errorf("%s in the README is not gofmt-formatted (%v); gofmt gives:\n%s", name[1], err, formatted)
		}
		files[name[1]] = code
	}
	return files
}

// TestReadmeFirstServiceCompilesAndPasses copies the Go blocks of "Your
// first service" into a module that requires tidemark (this checkout),
// checks they are gofmt-formatted, vets them and runs their test.
func TestReadmeFirstServiceCompilesAndPasses(t *testing.T) {
	body, ok := section(readme(t), firstServiceHeading)
	if !ok {
		t.Fatalf("README.md has no %q section", firstServiceHeading)
	}
	if !strings.Contains(body, "go get github.com/tidemark-streams/tidemark") {
		t.Errorf("the section does not say how to add tidemark to a module (go get github.com/tidemark-streams/tidemark)")
	}
	files := goFiles(t, body)
	if files["main.go"] == "" {
		t.Fatalf("the section has no main.go block (found %d blocks)", len(files))
	}
	dir := buildcheck.Module(t, files)
	if out, err := buildcheck.Go(t, dir, "vet", "./..."); err != nil {
		t.Fatalf("go vet of the README's code: %v\n%s", err, out)
	}
	if out, err := buildcheck.Go(t, dir, "test", "-count=1", "./..."); err != nil {
		t.Fatalf("go test of the README's code: %v\n%s", err, out)
	}
}
