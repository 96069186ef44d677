// Command tidemark is the tidemark CLI. Subcommands register themselves on
// rootCmd from init functions in their own files (gen.go, run.go, demo.go,
// ...), so this file stays small and stable.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "tidemark",
	Short: "Kafka-native stateful stream processing with fresh exactly-once output",
	Long: `tidemark runs stateful stream processing topologies on Kafka with
exactly-once results, committing output as soon as the staleness cost model
says it pays off.`,
	// main prints the error once; cobra's usage dump would bury it for
	// errors that have nothing to do with usage.
	SilenceErrors: true,
	SilenceUsage:  true,
}

func init() {
	rootCmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
}

func main() {
	// The first SIGINT or SIGTERM cancels the context so commands can flush
	// and exit cleanly; stop restores the default, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := rootCmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tidemark:", err)
		os.Exit(1)
	}
}
