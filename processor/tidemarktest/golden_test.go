package tidemarktest_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// transcript records what a scenario piped and what came out, and compares
// it with testdata/<test name>.golden: a failing golden shows the whole
// expected and actual picture. Run with -update to rewrite, then review the
// diff: the golden files are the specification.
type transcript struct {
	t       *testing.T
	b       strings.Builder
	d       *tidemarktest.Driver
	outputs []func() []string
}

func newTranscript(t *testing.T, d *tidemarktest.Driver) *transcript {
	return &transcript{t: t, d: d}
}

func (tr *transcript) note(format string, args ...any) {
	fmt.Fprintf(&tr.b, "# "+format+"\n", args...)
}

// goldenRun builds b into a driver and returns a transcript of it that
// watches topic out: the start of every golden scenario. The driver is
// tr.d, for the scenario's inputs.
func goldenRun[K, V any](t *testing.T, b *topology.Builder, out string, ks serde.Serde[K], vs serde.Serde[V]) *transcript {
	tr := newTranscript(t, newDriver(t, b))
	watch(tr, out, tidemarktest.Output(tr.d, out, ks, vs))
	return tr
}

// watch makes every step print the records written to out since the last
// step.
func watch[K, V any](tr *transcript, topic string, out *tidemarktest.OutputTopic[K, V]) {
	tr.outputs = append(tr.outputs, func() []string {
		var lines []string
		for _, r := range readAll(tr.t, out) {
			v := fmt.Sprint(r.Value)
			if r.Tombstone {
				v = "<tombstone>"
			}
			lines = append(lines, fmt.Sprintf("  < %s %v = %s @%d", topic, r.Key, v, r.Timestamp))
		}
		return lines
	})
}

func (tr *transcript) flush() {
	for _, o := range tr.outputs {
		for _, l := range o() {
			tr.b.WriteString(l + "\n")
		}
	}
}

func pipe[K, V any](tr *transcript, in *tidemarktest.InputTopic[K, V], topic string, k K, v V, ts int64) {
	tr.t.Helper()
	dropped := tr.d.Metrics().TotalDropped()
	fmt.Fprintf(&tr.b, "> %s %v = %v @%d\n", topic, k, v, ts)
	must(tr.t, in.Pipe(k, v, ts))
	tr.flush()
	if n := tr.d.Metrics().TotalDropped() - dropped; n > 0 {
		fmt.Fprintf(&tr.b, "  ! dropped %d\n", n)
	}
}

// pipeDelete is pipe for a tombstone of k (without pipe's dropped count).
func pipeDelete[K, V any](tr *transcript, in *tidemarktest.InputTopic[K, V], topic string, k K, ts int64) {
	tr.t.Helper()
	fmt.Fprintf(&tr.b, "> %s %v = <tombstone> @%d\n", topic, k, ts)
	must(tr.t, in.PipeTombstone(k, ts))
	tr.flush()
}

func (tr *transcript) check() {
	tr.t.Helper()
	path := filepath.Join("testdata", strings.ReplaceAll(tr.t.Name(), "/", "__")+".golden")
	got := tr.b.String()
	if *update {
		must(tr.t, os.MkdirAll("testdata", 0o755))
		must(tr.t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tr.t.Fatalf("read golden (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		tr.t.Errorf("%s differs from the golden file.\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
