package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-streams/tidemark/frontier/sim"
)

func init() { rootCmd.AddCommand(newSimCmd()) }

func newSimCmd() *cobra.Command {
	var (
		profiles string
		duration time.Duration
		sweep    bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate the frontier controller against fixed commit intervals over load profiles",
		Long: `sim runs package frontier's discrete-event simulator: the adaptive commit
policy beside fixed 100ms and fixed 1s intervals, over steady, ramp, burst and
overload profiles (or a load sweep), and prints throughput, staleness
percentiles and commits per second. Deterministic: the same flags give the
same table. An hour of simulated load takes about a second.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration <= 0 {
				return fmt.Errorf("--duration %s must be positive", duration)
			}
			if sweep {
				return sim.FormatSweep(os.Stdout, sim.Sweep(sim.DefaultLoads(), duration, sim.DefaultPolicies()...))
			}
			var ps []sim.Profile
			if profiles == "" {
				ps = sim.Profiles(duration)
			} else {
				for _, name := range strings.Split(profiles, ",") {
					p, ok := sim.Lookup(name, duration)
					if !ok {
						var known []string
						for _, k := range sim.Profiles(duration) {
							known = append(known, k.Name)
						}
						return fmt.Errorf("--profiles: unknown profile %q (known: %s)", name, strings.Join(known, ", "))
					}
					ps = append(ps, p)
				}
			}
			var reports []sim.Report
			for _, p := range ps {
				reports = append(reports, sim.Run(p, sim.DefaultPolicies()...))
			}
			return sim.Format(os.Stdout, reports...)
		},
	}
	cmd.Flags().StringVar(&profiles, "profiles", "", "comma-separated profiles (default: all)")
	cmd.Flags().DurationVar(&duration, "duration", time.Hour, "simulated time per profile")
	cmd.Flags().BoolVar(&sweep, "sweep", false, "sweep steady loads from 10% to 105% of capacity instead")
	return cmd
}
