package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tidemark-streams/tidemark/topology"
)

// runDescribe runs `tidemark describe args...` on a fresh command, so
// flags do not leak between tests.
func runDescribe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newDescribeCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// runTopology is the topology `tidemark run args...` runs: run's flags,
// resolveServiceConfig, validate and service.topology, as run's RunE
// does.
func runTopology(t *testing.T, args ...string) topology.Description {
	t.Helper()
	var configPath string
	f := defaultServiceConfig()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addServiceFlags(fs, &configPath, &f)
	if err := fs.Parse(append([]string{"--brokers", "k:9092"}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := resolveServiceConfig(configPath, os.Getenv, fs, f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := s.topology()
	if err != nil {
		t.Fatal(err)
	}
	return topo.Describe()
}

func clearServiceEnv(t *testing.T) {
	for _, k := range []string{"TIDEMARK_CONFIG", "TIDEMARK_PIPELINES", "TIDEMARK_APPLICATION", "TIDEMARK_TOPIC_PREFIX", "TIDEMARK_BROKERS"} {
		t.Setenv(k, "")
	}
}

func TestDescribePrintsWhatRunRuns(t *testing.T) {
	clearServiceEnv(t)
	if c, _, err := rootCmd.Find([]string{"describe"}); err != nil || c.Name() != "describe" {
		t.Fatalf("tidemark has no describe command: %v", err)
	}
	cfg := writeFile(t, "tidemark.yaml", "application: shop\ntopic_prefix: eu-\npipelines: [inventory, fraud]\n")
	for _, tc := range []struct {
		name     string
		describe []string
		run      []string
		dot      bool
		mention  []string
	}{
		{"defaults", nil, nil, false, []string{"Sub-topology: 0", "Source: inventory-events (topics: [inventory])"}},
		{"config file, as text", []string{"--config", cfg}, []string{"--config", cfg}, false,
			[]string{"topics: [eu-inventory]", "topics: [eu-payments]"}},
		{"config file, as dot", []string{"--config", cfg, "--format", "dot"}, []string{"--config", cfg}, true,
			[]string{`digraph "topology" {`, `"topic:eu-inventory"`, `"topic:shop-payment-velocity-changelog"`, "(changelog topic)", "shape=cylinder"}},
		{"a pipeline as argument is --pipelines", []string{"orders", "--format", "dot"}, []string{"--pipelines", "orders"}, true, []string{`subgraph "cluster_0"`}},
		{"flags over the file", []string{"--config", cfg, "--pipelines", "inventory"}, []string{"--config", cfg, "--pipelines", "inventory"}, false, []string{"eu-inventory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runDescribe(t, tc.describe...)
			if err != nil {
				t.Fatalf("describe %v: %v\n%s", tc.describe, err, got)
			}
			d := runTopology(t, tc.run...)
			want := d.String()
			if tc.dot {
				want = d.DOT()
			}
			if got != want {
				t.Errorf("describe %v differs from the topology of run %v:\n--- run\n%s\n--- describe\n%s", tc.describe, tc.run, want, got)
			}
			for _, m := range tc.mention {
				if !strings.Contains(got, m) {
					t.Errorf("describe %v does not mention %q:\n%s", tc.describe, m, got)
				}
			}
		})
	}
}

func TestDescribeErrors(t *testing.T) {
	clearServiceEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "png"}, `--format "png": want text, dot or svg`},
		{[]string{"inventory", "--pipelines", "fraud"}, "either as arguments or with --pipelines"},
		{[]string{"shipping"}, `pipeline "shipping"`},
	} {
		out, err := runDescribe(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("describe %v: error %v, want one containing %q (output %q)", tc.args, err, tc.want, out)
		}
	}
}

// TestDescribeRendersSVG renders the marketplace topology with Graphviz:
// the SVG names every sub-topology cluster and every topic. make test
// installs graphviz; without it the test fails saying how to get it.
func TestDescribeRendersSVG(t *testing.T) {
	clearServiceEnv(t)
	if _, err := exec.LookPath("dot"); err != nil {
		if os.Getenv("TIDEMARK_REQUIRE_BROWSER") != "" || os.Getenv("TIDEMARK_REQUIRE_GRAPHVIZ") != "" {
			t.Fatalf("Graphviz's dot is not on PATH: apt-get install -y graphviz (make test does): %v", err)
		}
		t.Skipf("Graphviz's dot is not on PATH (apt-get install -y graphviz; make test installs it): %v", err)
	}
	got, err := runDescribe(t, "--format", "svg")
	if err != nil {
		t.Fatalf("describe --format svg: %v\n%s", err, got)
	}
	if !strings.HasPrefix(strings.TrimSpace(got), "<?xml") || !strings.Contains(got, "<svg") || !strings.HasSuffix(strings.TrimSpace(got), "</svg>") {
		t.Fatalf("not an SVG document:\n%.300s", got)
	}
	d := runTopology(t)
	for i := range d.SubTopologies {
		if want := fmt.Sprintf("<title>cluster_%d</title>", i); !strings.Contains(got, want) {
			t.Errorf("the SVG has no %s", want)
		}
	}
	for _, topic := range []string{"inventory", "payments", "carts"} {
		if !strings.Contains(got, ">"+topic+"<") {
			t.Errorf("the SVG does not show topic %s", topic)
		}
	}
}

func TestDescribeSVGWithoutGraphvizSaysHowToGetIt(t *testing.T) {
	clearServiceEnv(t)
	old := dotCommand
	dotCommand = "tidemark-no-such-dot"
	defer func() { dotCommand = old }()
	_, err := runDescribe(t, "--format", "svg")
	if err == nil || !strings.Contains(err.Error(), "apt-get install graphviz") {
		t.Fatalf("error %v, want one that says how to install Graphviz", err)
	}
}
