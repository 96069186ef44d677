package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"
)

func init() { rootCmd.AddCommand(newDescribeCmd()) }

func newDescribeCmd() *cobra.Command {
	var (
		configPath string
		format     string
		f          = defaultServiceConfig()
	)
	cmd := &cobra.Command{
		Use:   "describe [PIPELINE...]",
		Short: "Print the topology `tidemark run` would run, as text, Graphviz DOT or SVG",
		Long: `describe builds the topology of the marketplace pipelines from the same
configuration as 'tidemark run' (defaults, --config or $TIDEMARK_CONFIG,
TIDEMARK_* environment variables, flags) and prints it without touching
Kafka: the same arguments describe what 'tidemark run' runs. Pipeline names
given as arguments stand for --pipelines. The flags that only matter to a
running service (--brokers, --http, ...) are accepted and ignored; the ones
that shape the topology are --pipelines, --application (the prefix of the
internal topics) and --topic-prefix.

--format text prints sub-topologies, nodes, topics and stores in the layout
of Kafka Streams' TopologyDescription. --format dot prints a Graphviz graph:
one cluster per sub-topology, external topics solid, internal repartition
and changelog topics dashed, stores as cylinders. --format svg renders that
graph with Graphviz's dot, which must be on PATH (apt-get install graphviz).`,
		Example: `  tidemark describe
  tidemark describe inventory
  tidemark describe --config tidemark.yaml --format svg > topology.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.Flags().Changed("pipelines") {
				return errors.New("describe: name the pipelines either as arguments or with --pipelines, not both")
			}
			cfg, err := resolveServiceConfig(configPath, os.Getenv, cmd.Flags(), f)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				cfg.Pipelines = args
			}
			s, err := cfg.validateOffline()
			if err != nil {
				return err
			}
			topo, err := s.topology()
			if err != nil {
				return err
			}
			d := topo.Describe()
			switch format {
			case "text":
				_, err = fmt.Fprint(cmd.OutOrStdout(), d.String())
			case "dot":
				_, err = fmt.Fprint(cmd.OutOrStdout(), d.DOT())
			case "svg":
				err = renderSVG(cmd.Context(), cmd.OutOrStdout(), d.DOT())
			default:
				return fmt.Errorf("describe: --format %q: want text, dot or svg", format)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, dot (Graphviz) or svg (rendered by Graphviz's dot)")
	addServiceFlags(cmd.Flags(), &configPath, &f)
	return cmd
}

// dotCommand is the Graphviz renderer describe --format svg runs.
var dotCommand = "dot"

// renderSVG renders a DOT graph to SVG with Graphviz's dot.
func renderSVG(ctx context.Context, w io.Writer, dot string) error {
	path, err := exec.LookPath(dotCommand)
	if err != nil {
		return fmt.Errorf("describe: --format svg needs Graphviz's %q on PATH (apt-get install graphviz), or use --format dot: %w", dotCommand, err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, path, "-Tsvg")
	c.Stdin = bytes.NewBufferString(dot)
	c.Stdout = w
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("describe: %s -Tsvg: %w: %s", path, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
