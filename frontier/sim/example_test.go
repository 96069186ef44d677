package sim_test

import (
	"os"
	"time"

	"github.com/tidemark-streams/tidemark/frontier/sim"
)

// The lead's `tidemark sim` command is this loop.
func ExampleRun() {
	for _, p := range sim.Profiles(10 * time.Minute) {
		_ = sim.Format(os.Stdout, sim.Run(p, sim.DefaultPolicies()...))
	}
}
