package topology_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestDescribeDOTGolden pins the DOT rendering of the two-chain topology;
// UPDATE_GOLDEN=1 rewrites the file, as for TestDescribeGolden.
func TestDescribeDOTGolden(t *testing.T) {
	topo, err := marketplace(false).Build()
	if err != nil {
		t.Fatal(err)
	}
	got := topo.Describe().DOT()
	path := filepath.Join("testdata", "describe-marketplace.dot.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("DOT() differs from %s:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
	if again := topo.Describe().DOT(); again != got {
		t.Errorf("DOT() is not stable between calls")
	}
}

var (
	dotDecl = regexp.MustCompile(`^\s*("(?:[^"\\]|\\.)*")\s*\[`)
	dotEdge = regexp.MustCompile(`^\s*("(?:[^"\\]|\\.)*")\s*->\s*("(?:[^"\\]|\\.)*")\s*(\[.*\])?;$`)
)

// checkDOT checks that dot is a plausible digraph: braces balance outside
// quoted strings, every statement line ends in ';' or a brace, and every
// edge endpoint is declared as a node.
func checkDOT(t *testing.T, dot string) (nodes map[string]bool, edges [][2]string) {
	t.Helper()
	if !strings.HasPrefix(dot, "digraph ") {
		t.Fatalf("DOT does not start with digraph:\n%s", dot)
	}
	depth, inQuote := 0, false
	for i := 0; i < len(dot); i++ {
		switch c := dot[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '{':
			depth++
		case !inQuote && c == '}':
			depth--
			if depth < 0 {
				t.Fatalf("unbalanced '}' at byte %d:\n%s", i, dot)
			}
		}
	}
	if depth != 0 || inQuote {
		t.Fatalf("braces unbalanced (depth %d) or a string unterminated (%v):\n%s", depth, inQuote, dot)
	}
	nodes = map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(dot), "\n") {
		line = strings.TrimSpace(line)
		if m := dotEdge.FindStringSubmatch(line); m != nil {
			edges = append(edges, [2]string{m[1], m[2]})
			continue
		}
		if m := dotDecl.FindStringSubmatch(line); m != nil {
			if !strings.HasSuffix(line, "];") {
				t.Errorf("declaration does not end in '];': %s", line)
			}
			if nodes[m[1]] {
				t.Errorf("node %s declared twice", m[1])
			}
			nodes[m[1]] = true
			continue
		}
		if !strings.HasSuffix(line, ";") && !strings.HasSuffix(line, "{") && line != "}" {
			t.Errorf("statement neither ends in ';' nor opens or closes a block: %s", line)
		}
	}
	for _, e := range edges {
		for _, end := range e {
			if !nodes[end] {
				t.Errorf("edge %s -> %s: %s is not declared", e[0], e[1], end)
			}
		}
	}
	return nodes, edges
}

func TestDescribeDOTIsPlausible(t *testing.T) {
	b := topology.NewBuilder("odd.app_-1")
	// Names with quotes and backslashes must stay inside their strings.
	b.Stream(`in "quoted" \ topic`, serde.String(), serde.String()).
		GroupBy(func(_, v string) string { return v }, serde.String()).Count().ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]topology.Description{"marketplace": mustBuild(t, marketplace(true)).Describe(), "quoted names": topo.Describe()} {
		t.Run(name, func(t *testing.T) {
			dot := d.DOT()
			nodes, edges := checkDOT(t, dot)
			var n, stores, internal int
			for _, st := range d.SubTopologies {
				n += len(st.Nodes)
			}
			for id := range nodes {
				if strings.HasPrefix(id, `"store:`) {
					stores++
				}
			}
			for _, line := range strings.Split(dot, "\n") {
				if strings.Contains(line, "dashed,filled") {
					internal++
				}
			}
			changelogs := 0
			for _, s := range d.Stores {
				if s.Changelog != "" {
					changelogs++
				}
			}
			if stores != len(d.Stores) || stores == 0 {
				t.Errorf("%d store nodes, want %d (one per store)", stores, len(d.Stores))
			}
			if want := len(d.RepartitionTopics) + changelogs; internal != want || internal == 0 {
				t.Errorf("%d internal topic nodes, want %d (repartition and changelog topics)", internal, want)
			}
			if len(edges) < n {
				t.Errorf("%d edges for %d nodes", len(edges), n)
			}
			if clusters := strings.Count(dot, "subgraph \"cluster_"); clusters != len(d.SubTopologies) {
				t.Errorf("%d clusters, want one per sub-topology (%d)", clusters, len(d.SubTopologies))
			}
		})
	}
}

func mustBuild(t *testing.T, b *topology.Builder) *topology.Topology {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}
