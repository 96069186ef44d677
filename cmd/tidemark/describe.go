package main

import (
	"errors"
	"fmt"
	"os"

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
		Short: "Print the topology `tidemark run` would run, as text or Graphviz DOT",
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
and changelog topics dashed, stores as cylinders; render it with
'dot -Tsvg'.`,
		Example: `  tidemark describe
  tidemark describe inventory
  tidemark describe --config tidemark.yaml --format dot | dot -Tsvg > topology.svg`,
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
			default:
				return fmt.Errorf("describe: --format %q: want text or dot", format)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or dot (Graphviz)")
	addServiceFlags(cmd.Flags(), &configPath, &f)
	return cmd
}
