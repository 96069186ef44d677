package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at release time: go build -ldflags "-X main.version=v0.1.0".
var version = "dev"

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the tidemark version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	})
}

// versionString adds the Go version and VCS revision from the build info,
// which identify a dev build when no version was stamped.
func versionString() string {
	s := "tidemark " + version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	s += " (" + bi.GoVersion
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
			s += ", rev " + kv.Value[:12]
		}
		if kv.Key == "vcs.modified" && kv.Value == "true" {
			s += "+dirty"
		}
	}
	return s + ")"
}
